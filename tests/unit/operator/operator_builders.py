"""Builders for pod and node test objects (API form, as the API server returns them; DLJobs come from
the shared `horus_operator.testing.builders.DLJobBuilder.stored`), and `FakeKube`, a fake of our own
API adapter (`operator.kube.Kube`): objects in dicts, behaving like the API server where it matters
(create of an existing name is a 409 and returns the stored object, status patches merge)."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.cache import job_key
from horus_operator.operator.jobs import pods


class PodBuilder:
    def __init__(self, job: str, attempt: int = 0, namespace: str = "team-a") -> None:
        request = {"key": f"{namespace}/{job}", "model": "resnet50", "batchSize": 32, "gpus": 1}
        self._body: dict[str, Any] = {
            "metadata": {
                "name": f"{job}-{attempt}",
                "namespace": namespace,
                "uid": f"pod-uid-{job}-{attempt}",
                "labels": {keys.LABEL_JOB: job, keys.LABEL_MANAGED_BY: keys.MANAGER},
                # As DLJobBuilder.stored(job) is: the DLJob controls its pods.
                "ownerReferences": [pods.owner_reference(job, f"uid-{job}")],
                "annotations": {
                    keys.ANNOTATION_ATTEMPT: str(attempt),
                    keys.ANNOTATION_NODE: "gpu-node-0",
                    keys.ANNOTATION_GPUS: "0",
                    keys.ANNOTATION_REQUEST: json.dumps(request),
                    keys.ANNOTATION_PREDICTED: json.dumps(
                        {"utilization": 0.6, "memoryMiB": 4000, "slowdown": 1.1}
                    ),
                },
            },
            "spec": {"containers": [{"name": "train"}]},
            "status": {"phase": "Pending"},
        }

    def owned_by(self, uid: str | None) -> PodBuilder:
        """Controlled by the DLJob of `uid` (None: by no DLJob, as a pod someone else made)."""
        self._body["metadata"]["ownerReferences"] = (
            [] if uid is None else [{**self._body["metadata"]["ownerReferences"][0], "uid": uid}]
        )
        return self

    def on(self, node: str, *gpus: int) -> PodBuilder:
        annotations = self._body["metadata"]["annotations"]
        annotations[keys.ANNOTATION_NODE] = node
        annotations[keys.ANNOTATION_GPUS] = ",".join(str(g) for g in gpus or (0,))
        return self

    def bound(self, node: str | None = None) -> PodBuilder:
        self._body["spec"]["nodeName"] = node or self._body["metadata"]["annotations"][keys.ANNOTATION_NODE]
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._body["status"]["phase"] = phase
        return self

    def unschedulable_since(self, stamp: str, message: str = "") -> PodBuilder:
        """kube-scheduler left it unschedulable since `stamp`, saying `message` (its PodScheduled=False
        condition's, e.g. "0/2 nodes are available: 1 Insufficient cpu, …"; none when "")."""
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": stamp,
        }
        self._body["status"]["conditions"] = [{**condition, **({"message": message} if message else {})}]
        return self

    def predicted(self, predicted: dict[str, Any]) -> PodBuilder:
        self._body["metadata"]["annotations"][keys.ANNOTATION_PREDICTED] = json.dumps(predicted)
        return self

    def started(self, stamp: str) -> PodBuilder:
        self._body["status"]["startTime"] = stamp
        return self

    def failed(self, message: str = "", *, finished: str = "2026-12-02T10:05:00Z") -> PodBuilder:
        """Failed at `finished`: its container exited 1 with `message` as its termination message (the
        log tail, under FallbackToLogsOnError)."""
        terminated = {"exitCode": 1, "reason": "Error", "finishedAt": finished, "message": message}
        self._body["status"]["phase"] = "Failed"
        self._body["status"]["containerStatuses"] = [{"name": "train", "state": {"terminated": terminated}}]
        return self

    def deleting(self) -> PodBuilder:
        self._body["metadata"]["deletionTimestamp"] = "2026-12-02T10:05:00Z"
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def gpu_node(
    name: str,
    *,
    count: int = 4,
    product: str = "Tesla-V100-SXM2-16GB",
    memory_mib: int = 16384,
    ready: bool = True,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                keys.LABEL_HOSTNAME: name,
                keys.LABEL_GPU_PRODUCT: product,
                keys.LABEL_GPU_COUNT: str(count),
                keys.LABEL_GPU_MEMORY: str(memory_mib),
            },
        },
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(count)},
        },
    }


class FakeKube:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}  # "namespace/name" -> ResourceClaim
        self.slices: list[dict[str, Any]] = []
        self.volume_claims: list[dict[str, Any]] = []  # PersistentVolumeClaims
        self.events: list[tuple[str, str, str]] = []
        self.creates = 0
        self.config_maps: dict[str, dict[str, str]] = {}  # "namespace/name" -> data
        self.claim_creates = 0
        self.graceful: list[tuple[str, int]] = []  # pods deleted with a grace period, and its seconds
        self._uids = itertools.count()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    async def read_config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        return copy.deepcopy(self.config_maps.get(f"{namespace}/{name}"))

    async def list_dljobs(self, namespace: str | None) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.jobs.values()))

    async def list_horus_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        return copy.deepcopy([pod for pod in self.pods.values() if not _reservation(pod)])

    async def list_reservation_pods(self) -> list[dict[str, Any]]:
        return copy.deepcopy([pod for pod in self.pods.values() if _reservation(pod)])

    async def list_nodes(self) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.nodes.values()))

    async def list_claims(self, namespace: str | None) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.claims.values()))

    async def list_slices(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.slices)

    async def list_volume_claims(self, namespace: str | None) -> list[dict[str, Any]]:
        return copy.deepcopy(self.volume_claims)

    async def create_claim(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        key = job_key(claim)
        if key in self.claims:
            return None
        self.claim_creates += 1
        self.claims[key] = copy.deepcopy(claim)
        return copy.deepcopy(claim)

    async def delete_claim(self, namespace: str, name: str) -> None:
        self.claims.pop(f"{namespace}/{name}", None)

    async def annotate_claim(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        claim = self.claims.get(f"{namespace}/{name}")
        if claim is not None:
            merged = {**claim["metadata"].get("annotations", {}), **annotations}
            claim["metadata"]["annotations"] = {k: v for k, v in merged.items() if v is not None}

    async def create_pod(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        key = job_key(pod)
        if key in self.pods:
            return copy.deepcopy(self.pods[key]), False
        self.creates += 1
        stored = copy.deepcopy(pod)
        stored["metadata"]["uid"] = f"pod-{next(self._uids)}"
        stored["status"] = {"phase": "Pending"}
        self.pods[key] = stored
        return copy.deepcopy(stored), True

    async def delete_pod(
        self, namespace: str, name: str, grace_period_s: int = 0, *, uid: str | None = None
    ) -> None:
        """At once, or with a grace period: the pod then stays, being deleted, until `stop_deleting`.
        `uid`: only that incarnation (the API server's precondition)."""
        key = f"{namespace}/{name}"
        if uid and key in self.pods and self.pods[key]["metadata"].get("uid") != uid:
            return
        if grace_period_s and key in self.pods:
            self.pods[key]["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
            self.graceful.append((name, grace_period_s))
        else:
            self.pods.pop(key, None)

    def stop_deleting(self) -> None:
        """The pods deleted with a grace period have stopped and are gone."""
        self.pods = {k: pod for k, pod in self.pods.items() if "deletionTimestamp" not in pod["metadata"]}

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
        job = self.jobs.get(f"{namespace}/{name}")
        if job is None:
            return None
        merged = {**job.get("status", {}), **copy.deepcopy(status)}  # JSON merge patch: null deletes
        job["status"] = {name: value for name, value in merged.items() if value is not None}
        return copy.deepcopy(job)

    async def post_event(self, involved: dict[str, Any], *, kind: str, reason: str, message: str) -> None:
        self.events.append((involved["metadata"]["name"], reason, message))


def _reservation(pod: dict[str, Any]) -> bool:
    return keys.LABEL_RESERVATION_NODE in (pod["metadata"].get("labels") or {})
