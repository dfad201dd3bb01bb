"""What the agent keeps of a pod the API server lists (kubernetes client models, no server)."""

import json
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


def reservation_pod(name: str, *, node: str | None, phase: str, version: str) -> dict[str, Any]:
    """A reservation pod's JSON, as the API server sends it."""
    meta = {
        "uid": f"uid-{name}",
        "namespace": keys.RESERVATION_NAMESPACE,
        "name": name,
        "labels": {keys.LABEL_RESERVATION_NODE: "node-a"},
        "resourceVersion": version,
    }
    spec = {"containers": [{"name": "reserve"}], **({"nodeName": node} if node else {})}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


class Response:
    """An unread HTTP response (`_preload_content=False`): its body whole, or as the lines of a watch."""

    def __init__(self, body: bytes) -> None:
        self.data = body
        self.released = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from (self.data[i : i + 7] for i in range(0, len(self.data), 7))  # chunks cut mid-line

    def release_conn(self) -> None:
        self.released = True


class ScriptedPods:
    """`CoreV1Api.list_namespaced_pod`: a list answers `listing`; each watch plays the next of `rounds`
    (events as JSON lines; an exception: the request fails)."""

    def __init__(self, listing: dict[str, Any], *rounds: list[dict[str, Any]] | Exception) -> None:
        self.listing, self.rounds = listing, list(rounds)
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.responses: list[Response] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Response:
        self.calls.append((args, kwargs))
        if not kwargs.get("watch"):
            return Response(json.dumps(self.listing).encode())
        events = self.rounds.pop(0)
        if isinstance(events, Exception):
            raise events
        lines = b"".join(json.dumps(e).encode() + b"\n" for e in events) + b"\n"
        self.responses.append(Response(lines))
        return self.responses[-1]


def test_reservation_pods_are_listed_then_watched_from_where_the_list_or_last_event_left_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pods = kube.ReservationPods()
    listing = {
        "metadata": {"resourceVersion": "10"},
        "items": [reservation_pod("r0", node=None, phase="Pending", version="9")],
    }
    bound = reservation_pod("r0", node="node-a", phase="Running", version="12")
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    scripted = ScriptedPods(listing, [{"type": "MODIFIED", "object": bound}, bookmark], [], [gone])
    monkeypatch.setattr(pods._core, "list_namespaced_pod", scripted)

    (r0,) = pods.list_pods()
    first = list(pods.watch_pods())
    assert list(pods.watch_pods()) == []
    with pytest.raises(kube.ApiUnavailableError, match="410"):
        list(pods.watch_pods())

    assert (r0.pod.uid, r0.node_name, r0.phase, r0.slot_node) == ("uid-r0", None, "Pending", "node-a")
    assert [(kind, r.node_name, r.phase, r.holds_gpu) for kind, r in first] == [
        ("MODIFIED", "node-a", "Running", True)
    ]
    list_call, *watches = scripted.calls
    assert list_call[0] == (keys.RESERVATION_NAMESPACE,)
    assert list_call[1]["label_selector"] == keys.LABEL_RESERVATION_NODE and not list_call[1].get("watch")
    assert [kwargs["resource_version"] for _, kwargs in watches] == ["10", "15", "15"]
    assert all(kwargs["allow_watch_bookmarks"] and kwargs["timeout_seconds"] for _, kwargs in watches)
    assert all(response.released for response in scripted.responses)


def test_a_refused_watch_of_the_reservation_pods_raises_to_be_listed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pods = kube.ReservationPods()
    scripted = ScriptedPods(
        {"metadata": {"resourceVersion": "1"}, "items": []}, ApiException(403, "Forbidden")
    )
    monkeypatch.setattr(pods._core, "list_namespaced_pod", scripted)
    pods.list_pods()
    with pytest.raises(kube.ApiUnavailableError, match="Forbidden"):
        list(pods.watch_pods())


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
