"""The operator's adapter to the API server: every call it makes, in one place, and the only operator
module that imports the Kubernetes client.

Built on the synchronous `kubernetes` client, called from a thread pool so the asyncio loop never
blocks; objects come back as plain dicts in API (camelCase) form, like kopf's bodies, and errors as
`apierrors`. "Already exists" on create and "not found" on delete are successes: repeating a decision
never duplicates anything.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from horus_operator.api import keys
from horus_operator.operator import apierrors

log = logging.getLogger(__name__)
T = TypeVar("T")


# Seconds to connect and to wait for a response, on every request. The client's default is none: a
# request on a connection that stalled (an API server gone mid-request, a dropped route) would wait for
# ever, and a job's status write with it, and, one write per job at a time, all its later writes. The
# operator's requests are single objects and lists; a list of 10,000 DLJobs takes a few seconds.
REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)


def load_client(*, pool_size: int) -> kubernetes.client.ApiClient:
    """A client for the in-cluster service account, else the current kubeconfig."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size + 8  # headroom for calls made outside the pool
    return kubernetes.client.ApiClient(configuration)


@dataclass(frozen=True)
class Lease:
    """A coordination.k8s.io Lease as the leader elector reads and writes it. `version` is the
    resourceVersion it was read at (None: not stored yet); a replace sends it back, which makes the
    replace a compare-and-swap against another replica."""

    holder: str | None
    duration_seconds: int
    acquired: datetime | None = None
    renewed: datetime | None = None
    transitions: int = 0
    version: str | None = None


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """The client's errors as ours. urllib3's errors (a refused connection, once its retries are spent)
    are not OSErrors, hence both."""
    try:
        yield
    except ApiException as error:
        body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else str(error.body or "")
        raise apierrors.of_status(error.status or 0, error.reason or "", body) from error
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise apierrors.ApiUnavailable(type(error).__name__) from error


def _json(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn`'s response as plain JSON: building the client's model objects costs more CPU than the
    request itself. Reading the body also hands the connection back to the pool."""
    with _translated():
        response = fn(*args, **kwargs, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        return json.loads(response.data) if response.data else None


class Kube:
    def __init__(
        self,
        client: kubernetes.client.ApiClient,
        *,
        workers: int,
        component: str = "horus",
        on_error: Callable[[Exception], None] = lambda error: None,
    ) -> None:
        """`on_error`: told of every error a call raises (`apierrors`; the operator's metrics count them)."""
        self._client = client
        self._on_error = on_error
        self._core = kubernetes.client.CoreV1Api(client)
        self._custom = kubernetes.client.CustomObjectsApi(client)
        self._coordination = kubernetes.client.CoordinationV1Api(client)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        self._component = component

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking `fn` (one of the blocking methods below, or a caller's step made of them) in the
        pool."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))
        except (apierrors.ApiError, apierrors.ApiUnavailable) as error:
            self._on_error(error)
            raise

    async def raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self.call(_json, fn, *args, **kwargs)

    # Lists (truth on start-up), as raw JSON dicts.
    async def list_dljobs(self, namespace: str | None) -> list[dict[str, Any]]:
        if namespace:
            fn = self._custom.list_namespaced_custom_object
            args: tuple[Any, ...] = (keys.GROUP, keys.VERSION, namespace, keys.PLURAL)
        else:
            fn = self._custom.list_cluster_custom_object
            args = (keys.GROUP, keys.VERSION, keys.PLURAL)
        return (await self.raw(fn, *args))["items"]

    async def list_horus_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        selector = f"{keys.LABEL_MANAGED_BY}={keys.MANAGER},{keys.LABEL_JOB}"
        if namespace:
            listing = await self.raw(self._core.list_namespaced_pod, namespace, label_selector=selector)
        else:
            listing = await self.raw(self._core.list_pod_for_all_namespaces, label_selector=selector)
        return listing["items"]

    async def list_reservation_pods(self) -> list[dict[str, Any]]:
        """The `reserve` binding's reservation pods (operator/binding/reservations.py)."""
        selector = keys.LABEL_RESERVATION_NODE
        listing = await self.raw(
            self._core.list_namespaced_pod, keys.RESERVATION_NAMESPACE, label_selector=selector
        )
        return listing["items"]

    async def list_managed_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        """The pod route's pods: labelled `horus.dev/managed: "true"` (by their owner or the webhook)."""
        selector = f"{keys.LABEL_MANAGED}=true"
        if namespace:
            listing = await self.raw(self._core.list_namespaced_pod, namespace, label_selector=selector)
        else:
            listing = await self.raw(self._core.list_pod_for_all_namespaces, label_selector=selector)
        return listing["items"]

    async def json_patch_pod(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Apply a JSON patch (RFC 6902) to a pod in one request: all of it or, on any failed operation
        or a resourceVersion it names that is no longer the pod's (`Conflict`), none of it."""
        return await self.raw(self._core.patch_namespaced_pod, name, namespace, operations)

    async def set_pod_condition(self, namespace: str, name: str, condition: Mapping[str, Any]) -> None:
        """Set one condition of a pod's status (a strategic merge: the others stay). Best effort."""
        try:
            await self.guard_pod_condition(namespace, name, condition)
        except (apierrors.ApiError, apierrors.ApiUnavailable) as error:
            log.warning(
                "condition %s on pod %s/%s not set: %s", condition.get("type"), namespace, name, error
            )

    async def guard_pod_condition(
        self, namespace: str, name: str, condition: Mapping[str, Any], version: str | None = None
    ) -> dict[str, Any]:
        """Set one condition of a pod's status, only while the pod is at `version` when one is given
        (`Conflict` otherwise); the pod as stored."""
        body: dict[str, Any] = {"status": {"conditions": [dict(condition)]}}
        if version is not None:
            body["metadata"] = {"resourceVersion": version}
        return await self.raw(self._core.patch_namespaced_pod_status, name, namespace, body)

    async def list_nodes(self) -> list[dict[str, Any]]:
        return (await self.raw(self._core.list_node))["items"]

    async def list_claims(self, namespace: str | None) -> list[dict[str, Any]]:
        """ResourceClaims: Horus's, and everyone's (a GPU another claim holds is not Horus's to give)."""
        group, version = keys.DRA_GROUP, keys.DRA_VERSION
        if namespace:
            listing = await self.raw(
                self._custom.list_namespaced_custom_object, group, version, namespace, "resourceclaims"
            )
        else:
            listing = await self.raw(
                self._custom.list_cluster_custom_object, group, version, "resourceclaims"
            )
        return listing["items"]

    async def list_volume_claims(self, namespace: str | None) -> list[dict[str, Any]]:
        """PersistentVolumeClaims (core/v1): which exist, before a job that names one is placed."""
        if namespace:
            listing = await self.raw(self._core.list_namespaced_persistent_volume_claim, namespace)
        else:
            listing = await self.raw(self._core.list_persistent_volume_claim_for_all_namespaces)
        return listing["items"]

    async def list_slices(self) -> list[dict[str, Any]]:
        fn = self._custom.list_cluster_custom_object
        return (await self.raw(fn, keys.DRA_GROUP, keys.DRA_VERSION, "resourceslices"))["items"]

    # Writes.
    async def create_pod(self, pod: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the pod as stored, whether this call created it). A pod of the same name is returned as is."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        with contextlib.suppress(apierrors.Conflict):
            return await self.raw(self._core.create_namespaced_pod, namespace, pod), True
        return await self.raw(self._core.read_namespaced_pod, name, namespace), False

    async def delete_pod(
        self, namespace: str, name: str, grace_period_s: int = 0, *, uid: str | None = None
    ) -> None:
        """Immediate deletion by default: the pod's node may be gone and never confirm a graceful one. A
        move gives the job its grace period to checkpoint. `uid`: only that incarnation of the name; a
        request that lands late (sent by a replica killed meanwhile) must not delete the pod made again
        under the same name since (the API server answers 409, taken as done)."""
        options = kubernetes.client.V1DeleteOptions(
            grace_period_seconds=grace_period_s,
            preconditions=kubernetes.client.V1Preconditions(uid=uid) if uid else None,
        )
        gone = (apierrors.NotFound, apierrors.Conflict) if uid else (apierrors.NotFound,)
        with contextlib.suppress(*gone):
            await self.raw(self._core.delete_namespaced_pod, name, namespace, body=options)

    async def create_claim(self, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        """The claim as stored; None when one of the same name was there (it counts as created: its spec
        is the same by its name).

        Sent as YAML (JSON is YAML): the API server then stores the opaque driver parameters as it
        re-encodes them. Sent as JSON, kube-apiserver v1.37 keeps their bytes as the client wrote them,
        and every later merge patch of the claim (`kubectl annotate`, `annotate_claim`) fails with
        "spec: field is immutable", as the patched copy re-encodes them differently."""
        meta = claim["metadata"]
        path = f"/apis/{keys.DRA_API_VERSION}/namespaces/{{namespace}}/resourceclaims"
        with contextlib.suppress(apierrors.Conflict):
            return await self.raw(
                self._client.call_api,
                path,
                "POST",
                {"namespace": meta["namespace"]},
                [],
                {"Content-Type": "application/yaml", "Accept": "application/json"},
                body=json.dumps(claim),
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
            )
        return None

    async def delete_claim(self, namespace: str, name: str) -> None:
        with contextlib.suppress(apierrors.NotFound):
            await self.raw(
                self._custom.delete_namespaced_custom_object,
                keys.DRA_GROUP,
                keys.DRA_VERSION,
                namespace,
                "resourceclaims",
                name,
            )

    async def annotate_claim(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge-patch a claim's annotations (None removes one); its spec is immutable."""
        with contextlib.suppress(apierrors.NotFound):
            await self.raw(
                self._custom.patch_namespaced_custom_object,
                keys.DRA_GROUP,
                keys.DRA_VERSION,
                namespace,
                "resourceclaims",
                name,
                {"metadata": {"annotations": dict(annotations)}},
            )

    async def patch_status(
        self, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch the status subresource (lists such as conditions are replaced whole)."""
        try:
            return await self.raw(
                self._custom.patch_namespaced_custom_object_status,
                keys.GROUP,
                keys.VERSION,
                namespace,
                keys.PLURAL,
                name,
                {"status": dict(status)},
            )
        except apierrors.NotFound:  # deleted meanwhile
            return None

    # Leases, blocking (the elector runs one read-then-write step in the pool).
    def read_lease(self, namespace: str, name: str) -> Lease | None:
        try:
            with _translated():
                stored = self._coordination.read_namespaced_lease(
                    name, namespace, _request_timeout=REQUEST_TIMEOUT
                )
        except apierrors.NotFound:
            return None
        spec = stored.spec
        return Lease(
            holder=spec.holder_identity,
            duration_seconds=spec.lease_duration_seconds or 0,
            acquired=spec.acquire_time,
            renewed=spec.renew_time,
            transitions=spec.lease_transitions or 0,
            version=stored.metadata.resource_version,
        )

    def create_lease(self, namespace: str, name: str, lease: Lease) -> bool:
        """False when another replica created it first; `NamespaceMissing` when `namespace` does not exist."""
        body = _lease_body(namespace, name, lease)
        try:
            with _translated():
                self._coordination.create_namespaced_lease(namespace, body, _request_timeout=REQUEST_TIMEOUT)
        except apierrors.Conflict:
            return False
        except apierrors.NotFound as error:
            raise apierrors.NamespaceMissing(namespace) from error
        return True

    def replace_lease(self, namespace: str, name: str, lease: Lease) -> bool:
        """A compare-and-swap on `lease.version`: False when another replica wrote the lease since."""
        try:
            with _translated():
                self._coordination.replace_namespaced_lease(
                    name, namespace, _lease_body(namespace, name, lease), _request_timeout=REQUEST_TIMEOUT
                )
        except apierrors.Conflict:
            return False
        return True

    # The observations dataset's ConfigMaps, blocking (its store runs in the pool).
    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return _json(self._core.list_namespaced_config_map, namespace, label_selector=selector)["items"]

    def put_config_map(self, namespace: str, body: Mapping[str, Any], *, exists: bool) -> None:
        """Create `body`, or replace the ConfigMap of its name when it `exists`."""
        if exists:
            _json(self._core.replace_namespaced_config_map, body["metadata"]["name"], namespace, body)
        else:
            _json(self._core.create_namespaced_config_map, namespace, body)

    def delete_config_map(self, namespace: str, name: str) -> None:
        with contextlib.suppress(apierrors.NotFound):
            _json(self._core.delete_namespaced_config_map, name, namespace)

    async def read_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """A ConfigMap's `data`, None when there is no such ConfigMap."""
        try:
            config_map = await self.raw(self._core.read_namespaced_config_map, name, namespace)
        except apierrors.NotFound:
            return None
        return dict(config_map.get("data") or {})

    def read_config_map_file(self, namespace: str, name: str, key: str) -> bytes:
        """Blocking (the workload resolver runs in the pool): the bytes under `key` of a ConfigMap."""
        try:
            config_map = _json(self._core.read_namespaced_config_map, name, namespace)
        except apierrors.NotFound as error:
            raise LookupError(f"ConfigMap {namespace}/{name}") from error
        binary = config_map.get("binaryData") or {}
        if key in binary:
            return base64.b64decode(binary[key])
        if key in (config_map.get("data") or {}):
            return config_map["data"][key].encode()
        raise LookupError(f"key {key!r} in ConfigMap {namespace}/{name}")

    async def post_event(
        self,
        involved: Mapping[str, Any],
        *,
        kind: str,
        reason: str,
        message: str,
        involved_kind: tuple[str, str] = (keys.API_VERSION, keys.KIND),
    ) -> None:
        """A core/v1 Event about a DLJob (what `kubectl describe dljob` shows), or about another object
        (`involved_kind`: its apiVersion and kind, e.g. a pod of the pod route). Best effort."""
        meta = involved["metadata"]
        now = datetime.now(UTC)
        event = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved_kind[0],
                "kind": involved_kind[1],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "type": kind,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._component,
            "firstTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        try:
            await self.raw(self._core.create_namespaced_event, meta["namespace"], event)
        except (apierrors.ApiError, apierrors.ApiUnavailable) as error:
            log.warning("event %s for %s/%s not posted: %s", reason, meta["namespace"], meta["name"], error)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def serves(client: kubernetes.client.ApiClient, api_version: str) -> bool:
    """Whether the API server serves `api_version` ("group/version"), e.g. resource.k8s.io/v1."""
    group, version = api_version.split("/")
    groups = _json(kubernetes.client.ApisApi(client).get_api_versions)["groups"]
    return any(
        g["name"] == group and any(v["version"] == version for v in g.get("versions", [])) for g in groups
    )


def _lease_body(namespace: str, name: str, lease: Lease) -> kubernetes.client.V1Lease:
    return kubernetes.client.V1Lease(
        metadata=kubernetes.client.V1ObjectMeta(
            name=name, namespace=namespace, resource_version=lease.version
        ),
        spec=kubernetes.client.V1LeaseSpec(
            holder_identity=lease.holder,
            lease_duration_seconds=lease.duration_seconds,
            acquire_time=lease.acquired,
            renew_time=lease.renewed,
            lease_transitions=lease.transitions,
        ),
    )
