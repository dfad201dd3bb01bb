from __future__ import annotations

import dataclasses
import json

from horus_operator.api import dljob, keys
from horus_operator.operator.jobs import jobspec, pods
from horus_operator.placement.types import Assignment
from horus_operator.prediction.api import Workload
from horus_operator.testing.builders import DLJobBuilder


def _placement(job_body: dict, *, uuids: tuple[str | None, ...] = (), attempt: int = 0) -> pods.Placement:
    job = dljob.parse(job_body)
    workload = Workload(model="resnet50", batch_size=job.batch_size)
    return pods.Placement(
        job=job,
        request=jobspec.request(job, workload, 5.0),
        assignment=Assignment(
            job=job.key,
            node="gpu-node-3",
            gpu_indices=(1, 2),
            predicted_utilization=0.61,
            predicted_memory_mib=5120.0,
            predicted_slowdown=1.12,
            colocated_with=("team-a/bert-1",),
        ),
        attempt=attempt,
        hostname="gpu-node-3",
        gpu_uuids=uuids,
    )


def test_pod_is_named_by_job_and_attempt_and_owned_by_the_dljob() -> None:
    pod = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj(), attempt=2))
    assert pod["metadata"]["name"] == "cnn-2"
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "DLJob",
        "cnn",
        "uid-cnn",
        True,
    )


def test_pod_is_pinned_to_the_node_and_sees_only_its_gpus() -> None:
    pod = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj()))
    assert pod["spec"]["nodeSelector"] == {keys.LABEL_HOSTNAME: "gpu-node-3"}
    env = pod["spec"]["containers"][0]["env"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "1,2"} in env


def test_gpu_uuids_are_preferred_when_all_are_known() -> None:
    pod = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj(), uuids=("GPU-a", "GPU-b")))
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-a,GPU-b"} in pod["spec"]["containers"][0]["env"]
    partly_known = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj(), uuids=("GPU-a", None)))
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "1,2"} in partly_known["spec"]["containers"][0]["env"]


def test_template_labels_env_and_node_selector_are_kept() -> None:
    template = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {
            "nodeSelector": {"zone": "z1"},
            "containers": [{"name": "train", "env": [{"name": "EPOCHS", "value": "3"}]}],
        },
    }
    body = DLJobBuilder.stored("cnn").spec(template=template).obj()
    pod = pods.build_pod(_placement(body))
    assert pod["metadata"]["labels"]["team"] == "a"
    assert pod["spec"]["nodeSelector"]["zone"] == "z1"
    assert pod["spec"]["containers"][0]["env"][0] == {"name": "EPOCHS", "value": "3"}
    assert pod["spec"]["restartPolicy"] == "Never"
    assert (
        "env" not in body["spec"]["template"]["spec"]["containers"][0]
        or len(body["spec"]["template"]["spec"]["containers"][0]["env"]) == 1
    ), "the DLJob's template must not be mutated"


def test_simulated_duration_becomes_the_kwok_stage_annotation() -> None:
    done = pods.build_pod(_placement(DLJobBuilder.stored("cnn").spec(simulation={"duration": "5s"}).obj()))
    assert done["metadata"]["annotations"][keys.KWOK_COMPLETE_DELAY] == "5s"
    failing = DLJobBuilder.stored("cnn").spec(simulation={"duration": "2s", "fail": True}).obj()
    assert pods.build_pod(_placement(failing))["metadata"]["annotations"][keys.KWOK_FAIL_DELAY] == "2s"


def test_a_built_pod_reads_back_as_the_same_placement() -> None:
    pod = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj(), attempt=1))
    view = pods.view(pod)
    assert (view.job_key, view.attempt, view.node, view.gpu_indices) == (
        "team-a/cnn",
        1,
        "gpu-node-3",
        (1, 2),
    )
    assert view.request is not None and view.request.workload.model == "resnet50"
    assert view.predicted["slowdown"] == 1.12
    assert view.colocated_with == ("team-a/bert-1",)
    assert view.holds_gpus


def test_request_round_trips_custom_features() -> None:
    request = jobspec.request(
        dljob.parse(DLJobBuilder.stored("x").obj()),
        Workload(model="custom", batch_size=8, features={"flops": 1e9}, features_key="onnx:abc"),
        1.0,
    )
    decoded = pods.decode_request(json.loads(json.dumps(pods.encode_request(request))))
    assert decoded == request
    assert decoded.workload.features == {"flops": 1e9}


def test_request_round_trips_precision_and_old_pods_read_as_fp32() -> None:
    request = jobspec.request(
        dljob.parse(DLJobBuilder.stored("x").obj()), Workload("resnet50", 32, precision="bf16"), 1.0
    )
    encoded = json.loads(json.dumps(pods.encode_request(request)))
    assert pods.decode_request(encoded) == request
    del encoded["precision"]  # a pod created before DLJobs had spec.precision
    assert pods.decode_request(encoded).workload.precision == "fp32"


def test_request_round_trips_the_framework_and_old_pods_read_as_pytorch() -> None:
    request = jobspec.request(
        dljob.parse(DLJobBuilder.stored("x").obj()), Workload("resnet50", 32, framework="tensorflow"), 1.0
    )
    encoded = json.loads(json.dumps(pods.encode_request(request)))
    assert pods.decode_request(encoded) == request
    del encoded["framework"]  # a pod created before DLJobs had spec.framework
    assert pods.decode_request(encoded).workload.framework == "pytorch"


def test_a_dra_bound_pod_references_its_gpus_claims_instead_of_an_environment_variable() -> None:
    body = DLJobBuilder.stored("cnn").spec(binding="dra").obj()
    claims = ("horus-gpu-node-3-gpu-a", "horus-gpu-node-3-gpu-b")
    placement = dataclasses.replace(_placement(body, uuids=("GPU-a", "GPU-b")), claims=claims)

    pod = pods.build_pod(placement)

    spec = pod["spec"]
    assert spec["resourceClaims"] == [
        {"name": "gpu-0", "resourceClaimName": claims[0]},
        {"name": "gpu-1", "resourceClaimName": claims[1]},
    ]
    (container,) = spec["containers"]
    assert container["resources"]["claims"] == [{"name": "gpu-0"}, {"name": "gpu-1"}]
    assert "env" not in container  # the driver, not NVIDIA_VISIBLE_DEVICES, gives the GPUs
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-3"}  # the claim's node too
    view = pods.view(pod)
    assert (view.binding, view.claims, view.gpu_uuids) == ("dra", claims, ("GPU-a", "GPU-b"))


def test_an_env_bound_pod_says_so_and_references_no_claim() -> None:
    view = pods.view(pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj())))
    assert (view.binding, view.claims) == ("env", ())


def test_the_share_scope_travels_with_the_request_and_old_pods_read_as_unscoped() -> None:
    job = dljob.parse(DLJobBuilder.stored("cnn", namespace="team-b").obj())
    request = jobspec.request(job, Workload(model="resnet50", batch_size=32), 0.0, dljob.Binding.DRA)
    assert request.share_scope == "dra/team-b"
    assert pods.decode_request(pods.encode_request(request)) == request
    old = pods.encode_request(request)
    del old["shareScope"]
    assert pods.decode_request(old).share_scope == ""


def _with_init_and_sidecar(body: dict) -> dict:
    template = body["spec"]["template"]
    template["spec"]["initContainers"] = [
        {"name": "fetch", "image": "cuda", "envFrom": [{"configMapRef": {"name": "all-gpus"}}]},
        {"name": "logger", "image": "cuda", "restartPolicy": "Always"},
    ]
    return body


def test_every_init_container_and_sidecar_sees_exactly_the_assigned_gpus() -> None:
    pod = pods.build_pod(_placement(_with_init_and_sidecar(DLJobBuilder.stored("cnn").obj())))
    for container in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]:
        # An explicit env entry wins over envFrom and the image's ENV.
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "1,2"} in container["env"], container["name"]


def test_under_dra_containers_outside_the_claims_see_no_gpu() -> None:
    placement = dataclasses.replace(
        _placement(_with_init_and_sidecar(DLJobBuilder.stored("cnn").obj())), claims=("c-0", "c-1")
    )
    pod = pods.build_pod(placement)
    for container in pod["spec"]["initContainers"]:
        assert container["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
        assert "claims" not in container.get("resources", {})
    assert all("NVIDIA_VISIBLE_DEVICES" not in str(c.get("env")) for c in pod["spec"]["containers"])


def test_under_cdi_the_annotation_names_the_gpus_by_uuid_and_no_container_reads_the_variable() -> None:
    uuids = ("GPU-a", "GPU-b")
    placement = dataclasses.replace(
        _placement(_with_init_and_sidecar(DLJobBuilder.stored("cnn").obj()), uuids=uuids),
        cdi_devices=tuple(pods.cdi_device(u) for u in uuids),
        binding="reserve",
    )
    pod = pods.build_pod(placement)
    annotations = pod["metadata"]["annotations"]
    assert annotations["cdi.k8s.io/horus_gpus"] == "nvidia.com/gpu=GPU-a,nvidia.com/gpu=GPU-b"
    assert annotations[keys.ANNOTATION_GPU_UUIDS] == "GPU-a,GPU-b"
    # A CUDA image's NVIDIA_VISIBLE_DEVICES=all would hand every GPU of the node to a pod requesting none.
    for container in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]:
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"], container["name"]
    assert "resourceClaims" not in pod["spec"]


def test_without_cdi_devices_a_pod_has_no_cdi_annotation() -> None:
    pod = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj(), uuids=("GPU-a", "GPU-b")))
    assert not any(key.startswith("cdi.k8s.io/") for key in pod["metadata"]["annotations"])


def test_host_cpus_travel_with_the_request_and_old_pods_read_as_none() -> None:
    job = dljob.parse(DLJobBuilder.stored("rl").obj())
    request = jobspec.request(job, Workload(model="a3c", batch_size=4, host_cpus=4.0), 5.0)
    assert pods.decode_request(pods.encode_request(request)).workload.host_cpus == 4.0
    old = pods.encode_request(request)
    del old["hostCpus"]
    assert pods.decode_request(old).workload.host_cpus == 0.0


def test_a_time_sliced_workload_round_trips_and_old_pods_read_as_their_binding_shares() -> None:
    """A pod created before `--sharing auto` has no `timeSliced`: env-bound, its co-tenants time-sliced
    (no MPS pipe is mounted), as `auto` says of env-bound jobs; DRA-bound, its claim served MPS."""
    job = dljob.parse(DLJobBuilder.stored("x").obj())
    request = jobspec.request(job, Workload("resnet50", 32, time_sliced=True), 1.0)
    encoded = json.loads(json.dumps(pods.encode_request(request)))
    assert pods.decode_request(encoded).workload.time_sliced
    assert not pods.decode_request({**encoded, "timeSliced": False}, env_bound=True).workload.time_sliced
    del encoded["timeSliced"]
    assert not pods.decode_request(encoded).workload.time_sliced
    body = pods.build_pod(_placement(DLJobBuilder.stored("cnn").obj()))
    annotations = body["metadata"]["annotations"]
    old = json.loads(annotations[keys.ANNOTATION_REQUEST])
    del old["timeSliced"]
    annotations[keys.ANNOTATION_REQUEST] = json.dumps(old)
    env_bound = pods.view(body).request
    annotations[keys.ANNOTATION_BINDING] = "dra"
    dra_bound = pods.view(body).request
    assert env_bound is not None and env_bound.workload.time_sliced
    assert dra_bound is not None and not dra_bound.workload.time_sliced
