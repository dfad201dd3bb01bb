"""Builders for pod and node test objects (API form, as the API server returns them); DLJobs come from
the shared `horus_operator.testing.builders.DLJobBuilder.stored`."""

from __future__ import annotations

import copy
import json
from typing import Any

from horus_operator.operator import keys


class PodBuilder:
    def __init__(self, job: str, attempt: int = 0, namespace: str = "team-a") -> None:
        request = {"key": f"{namespace}/{job}", "model": "resnet50", "batchSize": 32, "gpus": 1}
        self._body: dict[str, Any] = {
            "metadata": {
                "name": f"{job}-{attempt}",
                "namespace": namespace,
                "uid": f"pod-uid-{job}-{attempt}",
                "labels": {keys.LABEL_JOB: job, keys.LABEL_MANAGED_BY: keys.MANAGER},
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

    def unschedulable_since(self, stamp: str) -> PodBuilder:
        self._body["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": stamp,
            }
        ]
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
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
