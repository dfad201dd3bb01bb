"""`horus reserve` reads the one GPU its container sees; on a local cluster the fake agent plays that step,
one free GPU of its node per reservation pod that has not reported (agent/reserve.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from horus_operator.agent.readings import NvmlUnavailableError, PodInfo
from horus_operator.agent.reserve import reservations_to_report, reserved_uuid
from horus_operator.api import keys


class OneGpuNvml(SimpleNamespace):
    """NVML as a container given `count` GPUs sees it."""

    class NVMLError(Exception):
        pass

    def __init__(self, count: int) -> None:
        super().__init__(count=count, shut=False)

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return b"GPU-0b1c"


def test_a_reservation_reports_the_one_gpu_it_sees_and_refuses_to_guess_among_several() -> None:
    nvml = OneGpuNvml(1)
    assert reserved_uuid(nvml) == "GPU-0b1c"  # type: ignore[arg-type]
    assert nvml.shut
    with pytest.raises(NvmlUnavailableError, match="shows 4 GPUs"):
        reserved_uuid(OneGpuNvml(4))  # type: ignore[arg-type]


def _pod(name: str, reported: str = "", *, reservation: bool = True) -> PodInfo:
    labels: dict[str, Any] = {keys.LABEL_RESERVATION_NODE: "node-a"} if reservation else {}
    annotations = {keys.ANNOTATION_RESERVED_GPU: reported} if reported else {}
    return PodInfo(
        uid=name, namespace=keys.RESERVATION_NAMESPACE, name=name, labels=labels, annotations=annotations
    )


def test_the_fake_agent_gives_each_silent_reservation_a_gpu_no_other_reservation_reports() -> None:
    pods = [
        _pod("gpu-node-a-2"),
        _pod("gpu-node-a-0", "GPU-a"),
        _pod("gpu-node-a-1"),
        _pod("job", reservation=False),
    ]
    told = reservations_to_report(pods, ["GPU-a", "GPU-b", "GPU-c"])
    namespace = keys.RESERVATION_NAMESPACE
    assert told == {(namespace, "gpu-node-a-1"): "GPU-b", (namespace, "gpu-node-a-2"): "GPU-c"}
    assert reservations_to_report([_pod("x"), _pod("y")], ["GPU-a"]) == {(namespace, "x"): "GPU-a"}


def test_a_reservation_the_fake_agent_gave_a_gpu_keeps_it_though_a_stale_listing_shows_it_silent() -> None:
    # The listing predates the agent's own annotation of "x" (the watch cache lags): "x" is not told
    # again, and its GPU is not "y"'s.
    told = reservations_to_report([_pod("x"), _pod("y")], ["GPU-a", "GPU-b"], reported={"x": "GPU-a"})
    assert told == {(keys.RESERVATION_NAMESPACE, "y"): "GPU-b"}
