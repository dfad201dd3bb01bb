"""The agent's only door to the API server (kubernetes client library): read its node and the pods
bound to it, create its GPUNode and patch its status, (fake backend) publish its ResourceSlice, and
annotate a reservation pod with its GPU (`horus reserve`; on a local cluster the fake agent, which lists
and watches the reservation pods for that: `ReservationPods`). Errors surface as `ApiUnavailableError`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import HTTPError

from horus_operator.agent import gpunode
from horus_operator.agent.fakereserve import ReservationPod
from horus_operator.agent.readings import PodInfo
from horus_operator.api import keys

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
# A pod's CDI device annotations, as the NVIDIA container runtime reads them (its CDI mode's default
# `annotation-prefixes` and `default-kind`): `cdi.k8s.io/<key>: nvidia.com/gpu=<UUID or index>,...`.
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
CDI_GPU_KIND = "nvidia.com/gpu"
_ACTIVE_PHASES = ("Pending", "Running")  # bound pods that hold (or are about to hold) a GPU
# A watch of the reservation pods ends after this long (and is resumed): the fake agent's reporter then
# notices a stop and re-checks what it could not write. Short enough to stop promptly, long enough that
# an idle watch costs next to nothing.
RESERVATION_WATCH_SECONDS = 5
# A patch naming a pod's uid: not found (deleted), or the name is another pod's now (a uid mismatch is
# refused as a conflict or as a change of an immutable field).
_GONE = frozenset({404, 409, 422})
_WATCH_EVENTS = ("ADDED", "MODIFIED", "DELETED")  # the others: BOOKMARK (a version only), ERROR (raised)


class ApiUnavailableError(RuntimeError):
    """The API server refused or could not be reached; the caller backs off and retries."""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    uid: str
    labels: Mapping[str, str]


def load_config(kubeconfig: str | None = None) -> None:
    """In-cluster credentials (the DaemonSet's ServiceAccount), else `kubeconfig` (default: $KUBECONFIG
    as this process started, else ~/.kube/config)."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config(config_file=kubeconfig)


def read_node(name: str, api_client: client.ApiClient | None = None) -> NodeInfo:
    with _translated_errors():
        node = client.CoreV1Api(api_client).read_node(name)
    return NodeInfo(name=name, uid=node.metadata.uid, labels=dict(node.metadata.labels or {}))


def annotate_pod(
    namespace: str, name: str, annotations: Mapping[str, str], api_client: client.ApiClient | None = None
) -> None:
    """Merge `annotations` into a pod's (a reservation's reported GPU: agent/reserve.py)."""
    body = {"metadata": {"annotations": dict(annotations)}}
    with _translated_errors():
        client.CoreV1Api(api_client).patch_namespaced_pod(name, namespace, body)


def gpu_node_names(api_client: client.ApiClient | None = None) -> list[str]:
    """Nodes GPU Feature Discovery labelled as having GPUs (to run a whole fake cluster's agents)."""
    with _translated_errors():
        nodes = client.CoreV1Api(api_client).list_node(label_selector=f"{keys.LABEL_GPU_PRESENT}=true")
    return sorted(n.metadata.name for n in nodes.items)


class NodeApi:
    """The API calls of one node's agent."""

    def __init__(self, node: NodeInfo, api_client: client.ApiClient | None = None) -> None:
        self._node = node
        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)

    def pods(self) -> list[PodInfo]:
        # resource_version="0": served from the API server's watch cache, cheap at one list per interval
        with _translated_errors():
            pods = self._core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={self._node.name}", resource_version="0"
            )
        return [_pod_info(p) for p in pods.items if p.status and p.status.phase in _ACTIVE_PHASES]

    def publish(self, status: Mapping[str, Any]) -> None:
        """Patches the node's GPUNode status, creating the GPUNode first when it does not exist."""
        with _translated_errors():
            try:
                self._patch_status(status)
            except ApiException as error:
                if error.status != 404:
                    raise
                self._create()
                self._patch_status(status)

    def publish_devices(self, body: Mapping[str, Any]) -> None:
        """Creates the node's ResourceSlice `body`, or replaces the stored one when it differs."""
        group, version, plural = keys.DRA_GROUP, keys.DRA_VERSION, keys.RESOURCE_SLICE_PLURAL
        name = body["metadata"]["name"]
        with _translated_errors():
            try:
                self._custom.create_cluster_custom_object(group, version, plural, dict(body))
                return
            except ApiException as error:
                if error.status != 409:
                    raise
            stored = self._custom.get_cluster_custom_object(group, version, plural, name)
            if stored.get("spec") != body["spec"]:
                replacement = {**body, "metadata": {**body["metadata"], **_version_of(stored)}}
                self._custom.replace_cluster_custom_object(group, version, plural, name, replacement)

    def _create(self) -> None:
        body = gpunode.new_object(self._node.name, self._node.uid)
        try:
            self._custom.create_cluster_custom_object(keys.GROUP, keys.VERSION, keys.GPUNODE_PLURAL, body)
        except ApiException as error:
            if error.status != 409:  # created meanwhile (e.g. by a restarted agent): fine
                raise

    def _patch_status(self, status: Mapping[str, Any]) -> None:
        self._custom.patch_cluster_custom_object_status(
            keys.GROUP, keys.VERSION, keys.GPUNODE_PLURAL, self._node.name, dict(status)
        )


class ReservationPods:
    """The `reserve` binding's reservation pods, of every node (agent/fakereserve.py): listed, then
    watched from where the list or the last event left off."""

    def __init__(
        self, api_client: client.ApiClient | None = None, watch_seconds: int = RESERVATION_WATCH_SECONDS
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self._watch_seconds = watch_seconds
        self._resource_version: str | None = None

    def list_pods(self) -> list[ReservationPod]:
        # A consistent read, not one from the watch cache (resource_version="0"): a lagging list could
        # miss a pod just told its GPU. Lists are rare: at start and after a failed watch.
        with _translated_errors():
            response = self._core.list_namespaced_pod(
                keys.RESERVATION_NAMESPACE,
                label_selector=keys.LABEL_RESERVATION_NODE,
                _preload_content=False,
            )
            listed = json.loads(response.data)
        self._resource_version = listed["metadata"]["resourceVersion"]
        return [_reservation_pod(p) for p in listed["items"]]

    def watch_pods(self) -> Iterator[tuple[str, ReservationPod]]:
        """The changes since the list or the last event, for `watch_seconds`. A version too old to resume
        from (410 Gone) raises like any refusal: the caller lists again. Read as plain JSON: the client's
        models took milliseconds a pod, and at a burst's hundreds of events a second the reporter fell
        minutes behind the watch."""
        with _translated_errors():
            response = self._core.list_namespaced_pod(
                keys.RESERVATION_NAMESPACE,
                label_selector=keys.LABEL_RESERVATION_NODE,
                watch=True,
                resource_version=self._resource_version,
                # Bookmarks move the version on while no reservation changes, so a resumed watch rarely
                # finds it expired.
                allow_watch_bookmarks=True,
                timeout_seconds=self._watch_seconds,
                # The server ends the watch; this only guards against a connection that went silent.
                _request_timeout=(self._watch_seconds, 2 * self._watch_seconds),
                _preload_content=False,
            )
            try:
                for line in iter_resp_lines(response):  # the client's own Watch splits lines so
                    if line:
                        yield from self._event(json.loads(line))
            finally:
                response.release_conn()

    def _event(self, event: Mapping[str, Any]) -> Iterator[tuple[str, ReservationPod]]:
        kind, body = event["type"], event["object"]
        if kind == "ERROR":  # a Status: 410 Gone where the version to resume from expired
            raise ApiUnavailableError(f"API server: ({body.get('code')}) {body.get('message')}")
        self._resource_version = body["metadata"]["resourceVersion"]
        if kind in _WATCH_EVENTS:
            yield kind, _reservation_pod(body)

    def annotate(self, pod: PodInfo, annotations: Mapping[str, str]) -> bool:
        """Merge `annotations` into `pod`, naming its uid: the API server refuses the patch where the
        name is now another pod's, as a late telling of a deleted reservation would otherwise land on
        the slot's next one. False where that pod is gone."""
        body = {"metadata": {"uid": pod.uid, "annotations": dict(annotations)}}
        try:
            with _translated_errors():
                self._core.patch_namespaced_pod(pod.name, pod.namespace, body)
        except ApiUnavailableError as error:
            if isinstance(error.__cause__, ApiException) and error.__cause__.status in _GONE:
                return False
            raise
        return True


@contextlib.contextmanager
def _translated_errors() -> Iterator[None]:
    try:
        yield
    except (ApiException, HTTPError, OSError) as error:
        raise ApiUnavailableError(f"API server: {error}") from error


def _version_of(stored: Mapping[str, Any]) -> dict[str, str]:
    """A replace names the version it replaces: a concurrent writer makes it fail, not vanish."""
    return {"resourceVersion": stored["metadata"]["resourceVersion"]}


def _pod_info(pod: Any) -> PodInfo:
    meta = pod.metadata
    annotations = dict(meta.annotations or {})
    return PodInfo(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        labels=dict(meta.labels or {}),
        annotations=annotations,
        visible_devices=_cdi_gpus(annotations) or _visible_devices(pod.spec.containers or []),
    )


def _reservation_pod(pod: Mapping[str, Any]) -> ReservationPod:
    """From the pod's JSON (a reservation's containers name no GPU: no visible devices to read)."""
    meta = pod["metadata"]
    info = PodInfo(
        uid=meta["uid"],
        namespace=meta["namespace"],
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
    )
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return ReservationPod(pod=info, node_name=spec.get("nodeName"), phase=status.get("phase"))


def _cdi_gpus(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs a pod's CDI device annotations name. Where a pod has them, they and not its
    NVIDIA_VISIBLE_DEVICES (`void` under `reserve` with CDI: operator/jobs/pods.py) say which GPUs its
    containers get, as in the NVIDIA runtime's CDI mode."""
    devices: dict[str, None] = {}  # ordered set
    for key in sorted(k for k in annotations if k.startswith(CDI_ANNOTATION_PREFIX)):
        for name in annotations[key].split(","):
            kind, _, device = name.strip().partition("=")
            if kind == CDI_GPU_KIND and device:
                devices[device] = None
    return tuple(devices)


def _visible_devices(containers: list[Any]) -> tuple[str, ...]:
    devices: dict[str, None] = {}  # ordered set
    for container in containers:
        for env in container.env or []:
            if env.name == VISIBLE_DEVICES_ENV and env.value:
                devices.update((d.strip(), None) for d in env.value.split(",") if d.strip())
    return tuple(devices)
