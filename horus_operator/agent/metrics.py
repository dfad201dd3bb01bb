"""Prometheus metrics on /metrics: the latest summary as gauges (rebuilt on every scrape, so pods that
left do not linger as stale series) and counters of the agent's own health."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from horus_operator.agent.summary import NodeSummary

_GPU_LABELS = ("node", "gpu", "uuid", "product")
_POD_LABELS = ("node", "gpu", "namespace", "pod")


class SummaryCollector(Collector):
    def __init__(self) -> None:
        self.latest: NodeSummary | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        summary = self.latest
        if summary is None:
            return
        families = {
            "utilization": GaugeMetricFamily(
                "horus_gpu_utilization_ratio", "Mean SM utilization over the window", labels=_GPU_LABELS
            ),
            "memory_used": GaugeMetricFamily(
                "horus_gpu_memory_used_mib", "Peak memory used over the window", labels=_GPU_LABELS
            ),
            "memory_total": GaugeMetricFamily("horus_gpu_memory_total_mib", "GPU memory", labels=_GPU_LABELS),
            "healthy": GaugeMetricFamily("horus_gpu_healthy", "1 if the GPU is usable", labels=_GPU_LABELS),
            "pod_utilization": GaugeMetricFamily(
                "horus_pod_gpu_utilization_ratio", "A pod's mean SM share of a GPU", labels=_POD_LABELS
            ),
            "pod_memory": GaugeMetricFamily(
                "horus_pod_gpu_memory_mib", "A pod's peak memory on a GPU", labels=_POD_LABELS
            ),
        }
        for gpu in summary.gpus:
            labels = [summary.node, str(gpu.index), gpu.uuid, gpu.product]
            families["memory_total"].add_metric(labels, gpu.memory_total_mib)
            families["healthy"].add_metric(labels, 1.0 if gpu.healthy else 0.0)
            if gpu.utilization is not None:
                families["utilization"].add_metric(labels, gpu.utilization)
            if gpu.memory_used_mib is not None:
                families["memory_used"].add_metric(labels, gpu.memory_used_mib)
            for pod in gpu.pods:
                pod_labels = [summary.node, str(gpu.index), pod.namespace, pod.name]
                families["pod_utilization"].add_metric(pod_labels, pod.utilization)
                families["pod_memory"].add_metric(pod_labels, pod.memory_mib)
        yield from families.values()


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.summary = SummaryCollector()
        self.registry.register(self.summary)
        self.publishes = Counter(
            "horus_agent_publishes", "GPUNode status publishes", ["result"], registry=self.registry
        )
        self.nvml_errors = Counter("horus_agent_nvml_errors", "Failed NVML samples", registry=self.registry)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
