"""The agent loop: sample every `sample_interval`, publish a window summary every `publish_interval`
(at once when GPU health changes), back off while the API server refuses. Never exits on NVML or API
errors. One `step(now)` is one sampling pass, so tests drive it with their own clock. (The fake backend's
stand-in for the reservation pods' `horus reserve` runs beside it, from a watch: agent/fakereserve.py.)"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from horus_operator.agent import gpunode, summary
from horus_operator.agent.backend import NvmlBackend
from horus_operator.agent.metrics import AgentMetrics
from horus_operator.agent.pacing import PublishPacer
from horus_operator.agent.readings import GpuReading, NvmlUnavailableError, PodInfo, Sample

log = logging.getLogger(__name__)
MAX_WINDOW_SAMPLES = 1000


class NodeApi(Protocol):
    """What the loop needs from the API server, for its own node (`kube.NodeApi` in production)."""

    def pods(self) -> list[PodInfo]: ...

    def publish(self, status: dict[str, Any]) -> None: ...

    def publish_devices(self, body: Mapping[str, Any]) -> None: ...


@dataclass
class Agent:
    node: str
    backend: NvmlBackend
    api: NodeApi
    api_error: type[Exception]  # what `api` raises when the API server refuses
    metrics: AgentMetrics
    pacer: PublishPacer  # its interval is also how often the pod list is refreshed
    sample_interval: float = 1.0
    # The node's GPUs as a ResourceSlice, kept published (the fake backend stands in for NVIDIA's DRA
    # driver on kwok nodes); None: the driver publishes them, or nobody does.
    devices: Mapping[str, Any] | None = None
    _devices_published: bool = False
    _devices_error: str | None = None
    _pods: Sequence[PodInfo] = ()
    _pods_refreshed_at: float = float("-inf")
    # Bounded: while the API server is down the window would otherwise grow for as long as the outage.
    _window: deque[Sample] = field(default_factory=lambda: deque(maxlen=MAX_WINDOW_SAMPLES))
    _known_gpus: tuple[GpuReading, ...] = ()
    _nvml_error: str | None = None

    def step(self, now: float) -> summary.NodeSummary:
        self._refresh_pods(now)
        current = self._sample(now)
        self.metrics.summary.latest = current
        self._maybe_publish(now, current)
        return current

    def run_forever(self, clock: Callable[[], float], stop: threading.Event) -> None:
        while not stop.is_set():
            started = clock()
            self.step(started)
            stop.wait(max(0.0, self.sample_interval - (clock() - started)))
        self.backend.close()

    def _refresh_pods(self, now: float) -> None:
        if now - self._pods_refreshed_at < self.pacer.interval or not self.pacer.backoff.ready(now):
            return
        try:
            self._pods = self.api.pods()
            self._pods_refreshed_at = now
        except self.api_error as error:  # keep the last known pods and back off like a failed publish
            delay = self.pacer.failed(now)
            log.warning("listing pods on %s failed, retrying in %.1fs: %s", self.node, delay, error)

    def _sample(self, now: float) -> summary.NodeSummary:
        try:
            sample = self.backend.sample(self._pods, now)
        except NvmlUnavailableError as error:
            self.metrics.nvml_errors.inc()
            self._window.clear()
            if str(error) != self._nvml_error:  # once per distinct failure, not once per sample
                log.warning("GPUs of %s unavailable: %s", self.node, error)
            self._nvml_error = str(error)
            return summary.unavailable(
                node=self.node,
                backend=self.backend.name,
                now=now,
                message=str(error),
                known_gpus=self._known_gpus,
            )
        if self._nvml_error is not None:
            log.info("GPUs of %s available again", self.node)
            self._nvml_error = None
        self._known_gpus = sample.gpus
        self._window.append(sample)
        return summary.summarize(
            node=self.node, backend=self.backend.name, samples=list(self._window), pods=self._pods
        )

    def _maybe_publish(self, now: float, current: summary.NodeSummary) -> None:
        health = (current.nvml_available, *(g.healthy for g in current.gpus))
        if not self.pacer.due(now, health):
            return
        try:
            self.api.publish(gpunode.status_body(current, sample_interval=self.sample_interval))
        except self.api_error as error:
            delay = self.pacer.failed(now)
            self.metrics.publishes.labels(result="error").inc()
            log.warning("publishing GPUNode %s failed, retrying in %.1fs: %s", self.node, delay, error)
            return
        self.pacer.published(now, health)
        self.metrics.publishes.labels(result="ok").inc()
        self._window.clear()  # the next window starts with the next sample
        self._publish_devices()

    def _publish_devices(self) -> None:
        """Once, retried with each publish until it lands. A cluster without resource.k8s.io/v1 (or an
        agent not allowed to write ResourceSlices) is warned about once, not every publish."""
        if self.devices is None or self._devices_published:
            return
        try:
            self.api.publish_devices(self.devices)
        except self.api_error as error:
            if str(error) != self._devices_error:
                log.warning("publishing the ResourceSlice of %s failed (retried): %s", self.node, error)
            self._devices_error = str(error)
            return
        self._devices_published = True
        log.info("ResourceSlice of %s published", self.node)
