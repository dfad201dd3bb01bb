"""What the agent keeps of a pod the API server lists (kubernetes client models, no server)."""

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from horus_operator.agent import kube
from horus_operator.agent.readings import PodInfo
from horus_operator.api import keys


def listed_pod(
    *envs: list[client.V1EnvVar] | None, annotations: dict[str, str] | None = None
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid="u1", namespace="ns", name="p", labels={"horus.dev/dljob": "j"}, annotations=annotations
        ),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name=f"c{i}", env=env) for i, env in enumerate(envs)]
        ),
    )


def test_a_pods_cdi_gpu_annotations_name_its_gpus_instead_of_its_void_variable() -> None:
    annotations = {
        "cdi.k8s.io/horus_gpus": "nvidia.com/gpu=GPU-b,nvidia.com/gpu=GPU-a",
        "cdi.k8s.io/other_nic": "example.com/nic=eth1",  # not a GPU
        "horus.dev/gpus": "0",
    }
    void = [client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="void")]
    assert kube._pod_info(listed_pod(void, annotations=annotations)).visible_devices == ("GPU-b", "GPU-a")
    assert kube._pod_info(listed_pod(void, annotations={"horus.dev/gpus": "0"})).visible_devices == ("void",)


def test_visible_devices_of_all_containers_are_merged_in_order_without_repeats() -> None:
    pod = kube._pod_info(
        listed_pod(
            [client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="GPU-a, GPU-b")],
            [
                client.V1EnvVar(name="OTHER", value="x"),
                client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="GPU-b"),
            ],
            None,
        )
    )

    assert pod.visible_devices == ("GPU-a", "GPU-b")
    assert (pod.key, pod.uid, dict(pod.labels), dict(pod.annotations)) == (
        "ns/p",
        "u1",
        {"horus.dev/dljob": "j"},
        {},
    )


def reservation_pod(name: str, *, node: str | None, phase: str, version: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid=f"uid-{name}",
            namespace=keys.RESERVATION_NAMESPACE,
            name=name,
            labels={keys.LABEL_RESERVATION_NODE: "node-a"},
            resource_version=version,
        ),
        spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="reserve")]),
        status=client.V1PodStatus(phase=phase),
    )


class ScriptedWatch:
    """`kubernetes.watch.Watch`: each stream plays the next of `rounds` (an exception: the watch fails)."""

    def __init__(self, *rounds: list[dict[str, Any] | None] | Exception) -> None:
        self.rounds = list(rounds)
        self.calls: list[dict[str, Any]] = []

    def stream(self, func: Any, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any] | None]:
        self.calls.append({"args": args, **kwargs})
        events = self.rounds.pop(0)
        if isinstance(events, Exception):
            raise events
        yield from events


def event(kind: str, pod: client.V1Pod) -> dict[str, Any]:
    raw = client.ApiClient().sanitize_for_serialization(pod)
    return {"type": kind, "object": pod, "raw_object": raw}


def test_reservation_pods_are_listed_then_watched_from_where_the_list_or_last_event_left_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pods = kube.ReservationPods()
    listed = client.V1PodList(
        metadata=client.V1ListMeta(resource_version="10"),
        items=[reservation_pod("r0", node=None, phase="Pending", version="9")],
    )
    list_calls: list[tuple[Any, ...]] = []

    def list_namespaced_pod(*args: Any, **kwargs: Any) -> client.V1PodList:
        list_calls.append((args, kwargs))
        return listed

    monkeypatch.setattr(pods._core, "list_namespaced_pod", list_namespaced_pod)
    bound = reservation_pod("r0", node="node-a", phase="Running", version="12")
    bookmark = {"type": "BOOKMARK", "object": {}, "raw_object": {"metadata": {"resourceVersion": "15"}}}
    scripted = ScriptedWatch([event("MODIFIED", bound), None, bookmark], [], ApiException(410, "Gone"))
    monkeypatch.setattr(kube.watch, "Watch", lambda: scripted)

    (r0,) = pods.list_pods()
    first = list(pods.watch_pods())
    assert list(pods.watch_pods()) == []
    with pytest.raises(kube.ApiUnavailableError, match="Gone"):
        list(pods.watch_pods())

    assert list_calls == [((keys.RESERVATION_NAMESPACE,), {"label_selector": keys.LABEL_RESERVATION_NODE})]
    assert (r0.pod.uid, r0.node_name, r0.phase, r0.slot_node) == ("uid-r0", None, "Pending", "node-a")
    assert [(kind, r.node_name, r.phase, r.holds_gpu) for kind, r in first] == [
        ("MODIFIED", "node-a", "Running", True)
    ]
    assert [c["resource_version"] for c in scripted.calls] == ["10", "15", "15"]
    assert all(c["allow_watch_bookmarks"] and c["timeout_seconds"] for c in scripted.calls)
    assert scripted.calls[0]["args"] == (keys.RESERVATION_NAMESPACE,)


@pytest.mark.parametrize(("status", "landed"), [(None, True), (404, False), (409, False), (422, False)])
def test_a_reservation_is_told_its_gpu_naming_its_uid_and_a_pod_gone_is_said(
    monkeypatch: pytest.MonkeyPatch, status: int | None, landed: bool
) -> None:
    pods = kube.ReservationPods()
    patched: list[tuple[Any, ...]] = []

    def patch_namespaced_pod(*args: Any) -> None:
        patched.append(args)
        if status is not None:  # deleted, or the name is another pod's (its uid refused)
            raise ApiException(status, "refused")

    monkeypatch.setattr(pods._core, "patch_namespaced_pod", patch_namespaced_pod)
    pod = PodInfo(uid="uid-r0", namespace=keys.RESERVATION_NAMESPACE, name="r0")

    assert pods.annotate(pod, {keys.ANNOTATION_RESERVED_GPU: "GPU-a"}) is landed
    body = {"metadata": {"uid": "uid-r0", "annotations": {keys.ANNOTATION_RESERVED_GPU: "GPU-a"}}}
    assert patched == [("r0", keys.RESERVATION_NAMESPACE, body)]


def test_a_refused_telling_of_a_reservation_raises_to_be_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    pods = kube.ReservationPods()

    def patch_namespaced_pod(*args: Any) -> None:
        raise ApiException(500, "etcd leader changed")

    monkeypatch.setattr(pods._core, "patch_namespaced_pod", patch_namespaced_pod)
    pod = PodInfo(uid="uid-r0", namespace=keys.RESERVATION_NAMESPACE, name="r0")
    with pytest.raises(kube.ApiUnavailableError, match="etcd leader changed"):
        pods.annotate(pod, {keys.ANNOTATION_RESERVED_GPU: "GPU-a"})
