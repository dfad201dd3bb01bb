"""The GPUNode custom resource (horus.dev/v1alpha1, cluster-scoped, one per node, named after it):
how a `NodeSummary` is written into its status. The schema is in crds/gpunode.yaml; the operator reads
it back in `operator/telemetry/gpunodes.py`. Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from statistics import fmean
from typing import Any

from horus_operator.agent.summary import GpuSummary, NodeSummary, PodUsage
from horus_operator.api import keys


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_object(node: str, node_uid: str | None) -> dict[str, Any]:
    """An empty GPUNode, owned by its Node so that deleting the node deletes its telemetry."""
    metadata: dict[str, Any] = {"name": node, "labels": {keys.LABEL_NODE: node}}
    if node_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]
    return {
        "apiVersion": keys.API_VERSION,
        "kind": keys.GPUNODE_KIND,
        "metadata": metadata,
        "spec": {"node": node},
    }


def status_body(summary: NodeSummary, *, sample_interval: float) -> dict[str, Any]:
    """The full status (a merge patch replaces the `gpus` list as a whole)."""
    known_utilizations = [g.utilization for g in summary.gpus if g.utilization is not None]
    return {
        "status": {
            "lastUpdate": rfc3339(summary.taken_at),
            "backend": summary.backend,
            "nvmlAvailable": summary.nvml_available,
            "message": summary.message,
            "sampleIntervalSeconds": sample_interval,
            "windowSeconds": round(summary.window_seconds, 3),
            "gpuCount": len(summary.gpus),
            "healthyGpus": sum(g.healthy for g in summary.gpus),
            "utilization": _rounded(fmean(known_utilizations)) if known_utilizations else None,
            "memoryUsedMiB": _whole(sum(g.memory_used_mib or 0.0 for g in summary.gpus)),
            "memoryTotalMiB": sum(g.memory_total_mib for g in summary.gpus),
            # one value per GPU, by index, for `kubectl get gpunodes` (printer columns show one JSON value)
            "utilizationByGpu": ",".join(_percent(g.utilization) for g in summary.gpus),
            "memoryUsedMiBByGpu": ",".join(_text(_whole(g.memory_used_mib)) for g in summary.gpus),
            "gpus": [_gpu(g) for g in summary.gpus],
        }
    }


def _gpu(gpu: GpuSummary) -> dict[str, Any]:
    return _present(
        {
            "index": gpu.index,
            "uuid": gpu.uuid,
            "product": gpu.product,
            "memoryTotalMiB": gpu.memory_total_mib,
            "memoryUsedMiB": _whole(gpu.memory_used_mib),
            "utilization": _rounded(gpu.utilization),
            "memoryUtilization": _rounded(gpu.memory_utilization),
            "healthy": gpu.healthy,
            "pods": [_pod(p) for p in gpu.pods],
        }
    )


def _pod(pod: PodUsage) -> dict[str, Any]:
    return _present(
        {
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
            "job": pod.job,
            "utilization": _rounded(pod.utilization),
            "memoryMiB": _whole(pod.memory_mib),
            "stepsPerSecond": pod.steps_per_second,
        }
    )


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    """List items carry only known fields (the schema has no nullable fields)."""
    return {key: value for key, value in fields.items() if value is not None}


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.0%}"


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def _rounded(fraction: float | None) -> float | None:
    return None if fraction is None else round(fraction, 4)


def _whole(mib: float | None) -> int | None:
    return None if mib is None else round(mib)
