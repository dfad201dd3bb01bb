"""The operator's adapter to the API server: every write and list it makes, in one place.

Built on the synchronous `kubernetes` client, called from a thread pool so the asyncio loop never
blocks; objects come back as plain dicts in API (camelCase) form, like kopf's bodies. "Already exists"
on create and "not found" on delete are successes: repeating a decision never duplicates anything.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

import kubernetes
from kubernetes.client.exceptions import ApiException

from horus_operator.operator import keys

log = logging.getLogger(__name__)
T = TypeVar("T")


def load_client(*, pool_size: int) -> kubernetes.client.ApiClient:
    """A client for the in-cluster service account, else the current kubeconfig."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_size + 8  # headroom for calls made outside the pool
    return kubernetes.client.ApiClient(configuration)


class NamespaceMissing(LookupError):
    """A create in a namespace that does not exist: the one case the API server answers a create 404."""

    def __init__(self, namespace: str) -> None:
        super().__init__(f"namespace {namespace} not found")
        self.namespace = namespace


class Kube:
    def __init__(
        self, client: kubernetes.client.ApiClient, *, workers: int, component: str = "horus"
    ) -> None:
        self.core = kubernetes.client.CoreV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)
        self.coordination = kubernetes.client.CoordinationV1Api(client)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube")
        self._component = component

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    async def raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn`'s response as plain JSON: building the client's model objects costs more CPU than the
        request itself. Reading the body also hands the connection back to the pool."""

        def fetch() -> Any:
            response = fn(*args, **kwargs, _preload_content=False)
            return json.loads(response.data) if response.data else None

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fetch)

    # Lists (truth on start-up), as raw JSON dicts.
    async def list_dljobs(self, namespace: str | None) -> list[dict[str, Any]]:
        if namespace:
            fn = self.custom.list_namespaced_custom_object
            args: tuple[Any, ...] = (keys.GROUP, keys.VERSION, namespace, keys.PLURAL)
        else:
            fn = self.custom.list_cluster_custom_object
            args = (keys.GROUP, keys.VERSION, keys.PLURAL)
        return (await self.call(fn, *args))["items"]

    async def list_horus_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        selector = f"{keys.LABEL_MANAGED_BY}={keys.MANAGER},{keys.LABEL_JOB}"
        if namespace:
            listing = await self.raw(self.core.list_namespaced_pod, namespace, label_selector=selector)
        else:
            listing = await self.raw(self.core.list_pod_for_all_namespaces, label_selector=selector)
        return listing["items"]

    async def list_nodes(self) -> list[dict[str, Any]]:
        return (await self.raw(self.core.list_node))["items"]

    # Writes.
    async def create_pod(self, pod: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the pod as stored, whether this call created it). A pod of the same name is returned as is."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            return await self.raw(self.core.create_namespaced_pod, namespace, pod), True
        except ApiException as error:
            if error.status != 409:
                raise
        return await self.raw(self.core.read_namespaced_pod, name, namespace), False

    async def delete_pod(self, namespace: str, name: str) -> None:
        """Immediate deletion: the pod's node may be gone and never confirm a graceful one."""
        try:
            await self.raw(self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise

    async def patch_status(
        self, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch the status subresource (lists such as conditions are replaced whole)."""
        try:
            return await self.raw(
                self.custom.patch_namespaced_custom_object_status,
                keys.GROUP,
                keys.VERSION,
                namespace,
                keys.PLURAL,
                name,
                {"status": dict(status)},
            )
        except ApiException as error:
            if error.status == 404:  # deleted meanwhile
                return None
            raise

    # Leases, blocking (the elector runs one read-then-write step in the pool). Model objects, not dicts:
    # a replace sends back what was read, resourceVersion included.
    def read_lease(self, namespace: str, name: str) -> kubernetes.client.V1Lease | None:
        try:
            return self.coordination.read_namespaced_lease(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def create_lease(self, namespace: str, body: kubernetes.client.V1Lease) -> bool:
        """False when another replica created it first; `NamespaceMissing` when `namespace` does not exist."""
        try:
            self.coordination.create_namespaced_lease(namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            if error.status == 404:
                raise NamespaceMissing(namespace) from error
            raise
        return True

    def replace_lease(self, namespace: str, name: str, body: kubernetes.client.V1Lease) -> bool:
        """A compare-and-swap on the resourceVersion `body` was read with: False when another replica
        wrote the lease since."""
        try:
            self.coordination.replace_namespaced_lease(name, namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def read_config_map_file(self, namespace: str, name: str, key: str) -> bytes:
        """Blocking (the workload resolver runs in the pool): the bytes under `key` of a ConfigMap."""
        try:
            config_map = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if error.status == 404:
                raise LookupError(f"ConfigMap {namespace}/{name}") from error
            raise
        binary = config_map.binary_data or {}
        if key in binary:
            return base64.b64decode(binary[key])
        if key in (config_map.data or {}):
            return config_map.data[key].encode()
        raise LookupError(f"key {key!r} in ConfigMap {namespace}/{name}")

    async def post_event(self, involved: Mapping[str, Any], *, kind: str, reason: str, message: str) -> None:
        """A core/v1 Event about a DLJob (what `kubectl describe dljob` shows). Best effort."""
        meta = involved["metadata"]
        now = datetime.now(UTC)
        event = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": keys.API_VERSION,
                "kind": keys.KIND,
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
            await self.raw(self.core.create_namespaced_event, meta["namespace"], event)
        except ApiException as error:
            log.warning(
                "event %s for %s/%s not posted: %s", reason, meta["namespace"], meta["name"], error.reason
            )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
