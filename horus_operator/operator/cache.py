"""In-memory view of DLJobs, Horus pods and nodes, fed by kopf watch events (and a full list on start).

The API server stays the truth: the cache only saves re-listing on every decision. Each change marks the
affected jobs dirty and wakes the scheduling loop.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from horus_operator.operator import pods as pod_views
from horus_operator.operator import telemetry
from horus_operator.operator.pods import PodView
from horus_operator.operator.telemetry import NodeTelemetry


def job_key(body: Mapping[str, Any]) -> str:
    meta = body["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


class ClusterCache:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, PodView]] = defaultdict(dict)  # job key -> pod name -> view
        self.nodes: dict[str, dict[str, Any]] = {}
        self.gpunodes: dict[str, NodeTelemetry] = {}  # node name -> its agent's GPUNode, parsed once
        self.dirty: set[str] = set()
        self.nodes_changed = False
        self.wake = asyncio.Event()

    def mark(self, keys: Iterable[str]) -> None:
        self.dirty.update(keys)
        self.wake.set()

    def take_dirty(self) -> set[str]:
        taken, self.dirty = self.dirty, set()
        self.wake.clear()
        return taken

    def put_job(self, body: Mapping[str, Any]) -> None:
        key = job_key(body)
        self.jobs[key] = dict(body)
        self.mark([key])

    def drop_job(self, body: Mapping[str, Any]) -> None:
        self.jobs.pop(job_key(body), None)

    def put_pod(self, body: Mapping[str, Any]) -> PodView:
        pod = pod_views.view(body)
        self.pods[pod.job_key][pod.name] = pod
        self.mark([pod.job_key])
        return pod

    def drop_pod(self, body: Mapping[str, Any]) -> None:
        pod = pod_views.view(body)
        job_pods = self.pods.get(pod.job_key, {})
        job_pods.pop(pod.name, None)
        if not job_pods:
            self.pods.pop(pod.job_key, None)
        self.mark([pod.job_key])

    def put_node(self, body: Mapping[str, Any]) -> None:
        self.nodes[body["metadata"]["name"]] = dict(body)
        self.nodes_changed = True
        self.wake.set()

    def drop_node(self, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        self.nodes.pop(name, None)
        self.mark(
            key for key, job_pods in self.pods.items() if any(p.node == name for p in job_pods.values())
        )

    def put_gpunode(self, body: Mapping[str, Any]) -> None:
        self.gpunodes[body["metadata"]["name"]] = telemetry.parse(body)
        self.nodes_changed = True
        self.wake.set()

    def drop_gpunode(self, body: Mapping[str, Any]) -> None:
        self.gpunodes.pop(body["metadata"]["name"], None)
        self.nodes_changed = True

    def replace_all(
        self,
        *,
        jobs: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        nodes: Iterable[Mapping[str, Any]],
    ) -> None:
        """Start from a full listing (truth after a restart or a lost lease)."""
        self.jobs.clear()
        self.pods.clear()
        self.nodes.clear()
        for body in nodes:
            self.put_node(body)
        for body in pods:
            self.put_pod(body)
        for body in jobs:
            self.put_job(body)

    def all_pods(self) -> list[PodView]:
        return [pod for job_pods in self.pods.values() for pod in job_pods.values()]
