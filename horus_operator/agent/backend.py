"""The one seam between the agent loop and the GPUs: `NvmlBackend`, with a registry of implementations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from horus_operator.agent.fake import FakeBackend, FakeInventory
from horus_operator.agent.nvml import PynvmlBackend
from horus_operator.agent.readings import PodInfo, Sample


class NvmlBackend(Protocol):
    name: str

    def sample(self, pods: Sequence[PodInfo], now: float) -> Sample:
        """Read every GPU of this node once. `pods` are the pods bound to the node (the real backend
        maps its processes to them by cgroup; the fake one derives the readings from them).

        Raises `NvmlUnavailableError` when NVML is missing or fails.
        """
        ...

    def close(self) -> None: ...


def _fake(node: str, node_labels: Mapping[str, str], unhealthy: frozenset[int]) -> NvmlBackend:
    return FakeBackend(FakeInventory.from_node_labels(node, node_labels, unhealthy))


def _nvml(node: str, node_labels: Mapping[str, str], unhealthy: frozenset[int]) -> NvmlBackend:
    return PynvmlBackend()  # real GPUs say themselves whether they are healthy (`horus agent` refuses both)


# name -> factory(node name, node labels, GPU indices the fake reports unhealthy)
BACKENDS: dict[str, Callable[[str, Mapping[str, str], frozenset[int]], NvmlBackend]] = {
    "nvml": _nvml,
    "fake": _fake,
}
