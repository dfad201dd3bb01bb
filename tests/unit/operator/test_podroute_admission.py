"""What the pod webhook does at creation and the one patch that releases a gated pod (pure:
`podroute/admission.py`, `podroute/release.py`)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from horus_operator.api import keys
from horus_operator.api.dljob import Binding, InvalidJob, JobSpec
from horus_operator.operator.podroute import admission, release

MODEL = {keys.ANNOTATION_MODEL: "resnet50", keys.ANNOTATION_BATCH_SIZE: "32"}
DEVICES_FROM_ANNOTATION = {
    "name": "NVIDIA_VISIBLE_DEVICES",
    "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['horus.dev/visible-devices']"}},
}


def pod(
    *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any
) -> dict:
    return {
        "metadata": {
            "name": "p",
            "namespace": "team",
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "containers": [{"name": "train", "image": "t", "env": [{"name": "A", "value": "1"}]}],
            **spec,
        },
    }


def apply_json_patch(body: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 as far as the release uses it (add, remove, replace, test)."""
    patched = copy.deepcopy(body)
    for op in operations:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = patched
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) else last
        if op["op"] == "test":
            assert target[key] == op["value"], op
        elif op["op"] == "remove":
            del target[key]
        else:
            target[key] = op["value"]
    return patched


def test_a_pod_that_does_not_ask_for_horus_is_left_alone() -> None:
    assert admission.admit(pod(annotations={"other": "x"})) is None
    assert admission.admit(pod(labels={keys.LABEL_MANAGED: "false"}, annotations=MODEL)) is None


def test_a_labelled_pod_is_gated_and_reads_its_gpus_from_its_own_annotation() -> None:
    init = {"name": "fetch", "image": "i"}
    changes = admission.admit(
        pod(
            labels={keys.LABEL_MANAGED: "true"},
            annotations=MODEL,
            initContainers=[init],
            schedulingGates=[{"name": "x"}],
        )
    )
    assert changes is not None
    assert changes["metadata"] == {"labels": {keys.LABEL_MANAGED: "true"}}
    assert changes["spec"]["schedulingGates"] == [{"name": "x"}, {"name": keys.SCHEDULING_GATE}]
    (train,) = changes["spec"]["containers"]
    assert train["env"] == [{"name": "A", "value": "1"}, DEVICES_FROM_ANNOTATION]
    assert changes["spec"]["initContainers"][0]["env"] == [DEVICES_FROM_ANNOTATION]


def test_in_a_labelled_namespace_a_pod_naming_its_model_is_labelled_so_the_operator_sees_it() -> None:
    changes = admission.admit(pod(annotations=MODEL))
    assert changes is not None and changes["metadata"]["labels"] == {keys.LABEL_MANAGED: "true"}


def test_a_pod_admitted_twice_is_admitted_alike() -> None:
    once = pod(labels={keys.LABEL_MANAGED: "true"}, annotations=MODEL)
    changes = admission.admit(once)
    assert changes is not None
    twice = copy.deepcopy(once)
    twice["spec"].update(changes["spec"])
    # the API server stores the fieldRef with its apiVersion
    twice["spec"]["containers"][0]["env"][-1]["valueFrom"]["fieldRef"]["apiVersion"] = "v1"
    again = admission.admit(twice)
    assert again is not None and again["spec"]["schedulingGates"] == [{"name": keys.SCHEDULING_GATE}]
    assert [e["name"] for e in again["spec"]["containers"][0]["env"]] == ["A", "NVIDIA_VISIBLE_DEVICES"]


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"nodeName": "n"}, "spec.nodeName"),
        ({"nodeSelector": {"a": "b"}}, "spec.nodeSelector"),
        (
            {"containers": [{"name": "c", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}]},
            "spec.containers[0].env[0].name",
        ),
        (
            {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "spec.containers[0].resources.limits",
        ),
        (
            {"containers": [{"name": "c", "securityContext": {"privileged": True}}]},
            "spec.containers[0].securityContext.privileged",
        ),
    ],
)
def test_what_would_choose_the_node_or_gpus_is_refused_naming_the_pods_field(
    changed: dict, field: str
) -> None:
    with pytest.raises(InvalidJob) as raised:
        admission.admit(pod(labels={keys.LABEL_MANAGED: "true"}, annotations=MODEL, **changed))
    assert raised.value.field_path == field


def test_a_placement_record_written_by_the_owner_is_refused() -> None:
    with pytest.raises(InvalidJob, match=r"metadata.annotations\['horus.dev/node'\]='gpu-node-0'"):
        admission.admit(
            pod(
                labels={keys.LABEL_MANAGED: "true"}, annotations={**MODEL, keys.ANNOTATION_NODE: "gpu-node-0"}
            )
        )


def test_the_resolvers_verdict_names_the_annotation_and_a_config_map_is_left_for_later() -> None:
    def resolve(job: JobSpec) -> None:
        raise InvalidJob("spec.model.architecture", job.architecture, "unknown model")

    with pytest.raises(
        InvalidJob, match=r"metadata.annotations\['horus.dev/model'\]='resnet50': unknown model"
    ):
        admission.admit(pod(labels={keys.LABEL_MANAGED: "true"}, annotations=MODEL), resolve=resolve)
    later = {**MODEL, keys.ANNOTATION_MODEL: "onnx:graph"}
    assert admission.admit(pod(labels={keys.LABEL_MANAGED: "true"}, annotations=later), resolve=resolve)


def gated(**spec: Any) -> dict[str, Any]:
    body = pod(labels={keys.LABEL_MANAGED: "true"}, annotations=MODEL, **spec)
    body["metadata"].update(uid="u1", resourceVersion="7")
    body["spec"].setdefault("schedulingGates", [{"name": keys.SCHEDULING_GATE}])
    return body


def test_a_managed_pod_is_gated_placed_or_neither() -> None:
    waiting = release.read(gated())
    assert waiting.gated and not waiting.placed and waiting.waiting and waiting.key == "pod:team/p"
    placed = released(gated(schedulingGates=[]), {keys.ANNOTATION_NODE: "gpu-node-0"})
    assert release.read(placed).placed and not release.read(placed).waiting
    unplaced = release.read(gated(schedulingGates=[]))  # created while the webhook was not called
    assert not unplaced.gated and not unplaced.placed and not unplaced.waiting and not unplaced.tampered


def released(body: dict[str, Any], record: dict[str, str]) -> dict[str, Any]:
    """`body` as Horus releases it: `record` written, the condition stating its digest set."""
    body["metadata"]["annotations"].update(record)
    condition = release.released_condition(body["metadata"]["annotations"], datetime(2026, 12, 2, tzinfo=UTC))
    body["status"] = {"conditions": [condition]}
    return body


RECORD = {keys.ANNOTATION_NODE: "gpu-node-0", keys.ANNOTATION_GPUS: "1", keys.ANNOTATION_VISIBLE_DEVICES: "1"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({keys.ANNOTATION_NODE: "gpu-node-1"}, "not the one Horus released"),
        ({keys.ANNOTATION_VISIBLE_DEVICES: "all"}, "not the one Horus released"),
        ({keys.ANNOTATION_COLOCATED: "other/x"}, "not the one Horus released"),
    ],
)
def test_a_record_changed_after_release_is_not_horuss(change: dict[str, str], why: str) -> None:
    body = released(gated(schedulingGates=[]), RECORD)
    body["metadata"]["annotations"].update(change)
    pod = release.read(body)
    assert why in pod.tampered and not pod.placed and not pod.waiting


def test_a_record_horus_never_released_is_not_horuss_and_a_gated_pods_record_waits_for_the_release() -> None:
    forged = gated(schedulingGates=[])
    forged["metadata"]["annotations"].update(RECORD)  # a pod made with a record, past the webhook
    assert "not the one Horus released" in release.read(forged).tampered
    gated_forged = gated()
    gated_forged["metadata"]["annotations"].update(RECORD)  # the release writes its own over it
    pod = release.read(gated_forged)
    assert pod.waiting and not pod.placed and not pod.tampered


def test_a_pod_bound_to_another_node_than_its_record_is_not_horuss() -> None:
    body = released(gated(schedulingGates=[]), RECORD)
    body["spec"]["nodeName"] = "gpu-node-3"
    assert "runs on node gpu-node-3" in release.read(body).tampered
    body["spec"]["nodeName"] = "gpu-node-0"
    assert release.read(body).placed


def test_a_gate_removed_from_a_pod_the_webhook_gated_is_not_horuss() -> None:
    body = pod(labels={keys.LABEL_MANAGED: "true"}, annotations=MODEL)
    changes = admission.admit(body)
    assert changes is not None
    body["spec"].update(changes["spec"], schedulingGates=[])
    assert "scheduling gate horus.dev/placement was removed" in release.read(body).tampered


def test_a_pod_released_by_a_horus_before_the_digest_is_trusted_as_it_was() -> None:
    body = gated(schedulingGates=[])
    body["metadata"]["annotations"].update(RECORD)
    body["status"] = {"conditions": [{"type": keys.CONDITION_PLACED, "status": "True"}]}
    assert release.read(body).placed


def test_the_progress_its_job_reports_is_no_part_of_the_record() -> None:
    body = released(gated(schedulingGates=[]), RECORD)
    body["metadata"]["annotations"][keys.ANNOTATION_PROGRESS] = "12.5"
    assert release.read(body).placed


def test_the_release_is_one_patch_that_keeps_other_gates_and_node_labels() -> None:
    body = gated(schedulingGates=[{"name": "other"}, {"name": keys.SCHEDULING_GATE}])
    record = {
        keys.ANNOTATION_NODE: "gpu-node-1",
        keys.ANNOTATION_GPUS: "2",
        keys.ANNOTATION_VISIBLE_DEVICES: "2",
    }
    operations = release.release_operations(release.read(body), record, "host-1")
    assert {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"} in operations
    released = apply_json_patch(body, operations)
    assert released["spec"]["schedulingGates"] == [{"name": "other"}]
    assert released["spec"]["nodeSelector"] == {keys.LABEL_HOSTNAME: "host-1"}
    assert released["metadata"]["annotations"] == {**MODEL, **record}
    with_selector = gated(nodeSelector={"zone": "a"})
    released = apply_json_patch(
        with_selector, release.release_operations(release.read(with_selector), record, "h")
    )
    assert released["spec"]["nodeSelector"] == {"zone": "a", keys.LABEL_HOSTNAME: "h"}


def test_a_pytorchjobs_pod_without_its_group_size_is_refused_naming_the_annotation() -> None:
    master = pod(labels={keys.LABEL_MANAGED: "true", keys.LABEL_PYTORCHJOB: "mnist"}, annotations=MODEL)
    with pytest.raises(
        InvalidJob, match=r"horus.dev/group-size'\]=None: required for the pods of a PyTorchJob"
    ):
        admission.admit(master)
    master["metadata"]["annotations"][keys.ANNOTATION_GROUP_SIZE] = "3"
    assert admission.admit(master) is not None


DRA = admission.Bindings(default=Binding.ENV, dra_served=True)
CLAIMED = {**MODEL, keys.ANNOTATION_BINDING: "dra"}


def admitted(body: dict[str, Any], **options: Any) -> dict[str, Any]:
    """`body` as the API server stores it after the webhook's merge patch."""
    changes = admission.admit(body, **options)
    assert changes is not None
    stored = copy.deepcopy(body)
    stored["metadata"]["labels"].update(changes["metadata"]["labels"])
    stored["spec"].update(changes["spec"])
    return stored


def test_a_dra_bound_pod_references_a_claim_per_gpu_named_after_it_and_reads_no_gpu_variable() -> None:
    body = pod(
        labels={keys.LABEL_MANAGED: "true"},
        annotations={**CLAIMED, keys.ANNOTATION_GPU_COUNT: "2"},
        initContainers=[{"name": "fetch", "image": "i"}],
    )
    stored = admitted(body, bindings=DRA, token="t0k3n")
    assert stored["spec"]["schedulingGates"] == [{"name": keys.SCHEDULING_GATE}]
    assert stored["spec"]["resourceClaims"] == [
        {"name": "gpu-0", "resourceClaimName": "p-gpu-0"},
        {"name": "gpu-1", "resourceClaimName": "p-gpu-1"},
    ]
    (train,) = stored["spec"]["containers"]
    assert train["resources"]["claims"] == [{"name": "gpu-0"}, {"name": "gpu-1"}]
    assert train["env"] == [{"name": "A", "value": "1"}]  # the driver gives the device, no variable
    assert stored["spec"]["initContainers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert admission.own_claims(stored["spec"]) == ("p-gpu-0", "p-gpu-1")


def test_a_controllers_pod_without_a_name_yet_gets_claims_named_by_the_admissions_token() -> None:
    body = pod(labels={keys.LABEL_MANAGED: "true"}, annotations=CLAIMED)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "train-0-"
    stored = admitted(body, bindings=DRA, token="5eed")
    assert admission.own_claims(stored["spec"]) == ("train-0-5eed-gpu-0",)


def test_a_dra_bound_pod_is_judged_again_and_admitted_again_alike() -> None:
    stored = admitted(pod(labels={keys.LABEL_MANAGED: "true"}, annotations=CLAIMED), bindings=DRA, token="a")
    assert admission.check(stored).binding == "dra"  # what the route judges when it places the pod
    again = admitted(stored, bindings=DRA, token="b")  # another token: the names already chosen stay
    assert again["spec"] == stored["spec"]


def test_the_binding_follows_the_dljobs_rule_and_its_errors_name_the_annotation() -> None:
    labelled = {keys.LABEL_MANAGED: "true"}
    by_default = admitted(
        pod(labels=labelled, annotations=MODEL), bindings=admission.Bindings(Binding.DRA, dra_served=True)
    )
    assert admission.own_claims(by_default["spec"]) == ("p-gpu-0",)
    env = admitted(
        pod(labels=labelled, annotations={**MODEL, keys.ANNOTATION_BINDING: "env"}),
        bindings=admission.Bindings(Binding.DRA, dra_served=True),
    )
    assert "resourceClaims" not in env["spec"]
    assert env["spec"]["containers"][0]["env"][-1] == DEVICES_FROM_ANNOTATION
    with pytest.raises(
        InvalidJob, match=r"annotations\['horus.dev/binding'\]='gpu': expected one of env, dra"
    ):
        admission.admit(pod(labels=labelled, annotations={**MODEL, keys.ANNOTATION_BINDING: "gpu"}))
    with pytest.raises(InvalidJob, match=r"horus.dev/binding'\]='dra': the API server does not serve"):
        admission.admit(pod(labels=labelled, annotations=CLAIMED))


def test_a_routed_pod_asking_reserve_is_refused_and_one_under_a_reserve_default_gets_env() -> None:
    """Without the operator's CDI device mode: a gated pod's environment cannot be told a GPU later."""
    labelled = {keys.LABEL_MANAGED: "true"}
    with pytest.raises(
        InvalidJob,
        match=r"horus.dev/binding'\]='reserve': .* where the operator runs --reservation-device-mode cdi",
    ):
        admission.admit(pod(labels=labelled, annotations={**MODEL, keys.ANNOTATION_BINDING: "reserve"}))
    defaulted = admitted(
        pod(labels=labelled, annotations=MODEL), bindings=admission.Bindings(Binding.RESERVE)
    )
    assert defaulted["spec"]["containers"][0]["env"][-1] == DEVICES_FROM_ANNOTATION


RESERVE_CDI = admission.Bindings(default=Binding.ENV, reserve_cdi=True)
NO_GPU = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}


def test_under_cdi_device_mode_a_reserve_bound_pods_containers_are_told_no_gpu_by_the_variable() -> None:
    labelled = {keys.LABEL_MANAGED: "true"}
    init = [{"name": "fetch", "image": "f", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]
    asked = pod(
        labels=labelled, annotations={**MODEL, keys.ANNOTATION_BINDING: "reserve"}, initContainers=init
    )
    with pytest.raises(InvalidJob, match=r"NVIDIA_VISIBLE_DEVICES"):  # an owner's own variable: refused
        admission.admit(asked, bindings=RESERVE_CDI)
    del asked["spec"]["initContainers"][0]["env"]
    stored = admitted(asked, bindings=RESERVE_CDI)
    assert stored["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, NO_GPU]
    assert stored["spec"]["initContainers"][0]["env"] == [NO_GPU]
    assert admission.bound_by(stored["spec"]) is Binding.RESERVE
    assert admission.check(stored).binding == "reserve"  # judged again when placed: as at admission
    assert admitted(stored, bindings=RESERVE_CDI)["spec"] == stored["spec"]
    defaulted = admitted(
        pod(labels=labelled, annotations=MODEL),
        bindings=admission.Bindings(Binding.RESERVE, reserve_cdi=True),
    )
    assert admission.bound_by(defaulted["spec"]) is Binding.RESERVE
    env = admitted(pod(labels=labelled, annotations=MODEL), bindings=RESERVE_CDI)
    assert admission.bound_by(env["spec"]) is Binding.ENV
    dra = admitted(pod(labels=labelled, annotations=CLAIMED), bindings=DRA)  # its init containers: void too
    assert admission.bound_by(dra["spec"]) is Binding.DRA


def test_a_pod_naming_horus_cdi_devices_itself_is_refused() -> None:
    annotations = {**MODEL, "cdi.k8s.io/horus_gpus": "nvidia.com/gpu=GPU-of-a-neighbour"}
    with pytest.raises(InvalidJob, match=r"annotations\['cdi.k8s.io/horus_gpus'\].*Horus's record"):
        admission.admit(
            pod(labels={keys.LABEL_MANAGED: "true"}, annotations=annotations), bindings=RESERVE_CDI
        )


def test_an_owners_own_claims_are_still_refused_and_a_gpu_count_changed_since_admission_too() -> None:
    labelled = {keys.LABEL_MANAGED: "true"}
    own = pod(
        labels=labelled, annotations=CLAIMED, resourceClaims=[{"name": "mine", "resourceClaimName": "x"}]
    )
    with pytest.raises(InvalidJob, match=r"spec.resourceClaims"):
        admission.admit(own, bindings=DRA)
    stored = admitted(pod(labels=labelled, annotations=CLAIMED), bindings=DRA)
    stored["metadata"]["annotations"][keys.ANNOTATION_GPU_COUNT] = "2"
    with pytest.raises(InvalidJob, match=r"horus.dev/gpu-count'\]='2': the pod references 1 ResourceClaims"):
        admission.check(stored)
