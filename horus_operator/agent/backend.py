"""The one seam between the agent loop and the GPUs: `NvmlBackend`, with a registry of implementations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from horus_operator.agent.fake import FakeBackend, FakeInventory, FakeOptions
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


def _fake(node: str, node_labels: Mapping[str, str], options: FakeOptions) -> NvmlBackend:
    return FakeBackend(FakeInventory.from_node_labels(node, node_labels, options.unhealthy), options.truth)


def _nvml(node: str, node_labels: Mapping[str, str], options: FakeOptions) -> NvmlBackend:
    return PynvmlBackend()  # real GPUs say how they are and run as they run (`horus agent` refuses options)


# name -> factory(node name, node labels, what only the fake reads)
BACKENDS: dict[str, Callable[[str, Mapping[str, str], FakeOptions], NvmlBackend]] = {
    "nvml": _nvml,
    "fake": _fake,
}
