"""The real backend against a stand-in for the pynvml module (no GPU here): the module object is the
seam, exactly the calls and shapes nvidia-ml-py documents."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from horus_operator.agent.nvml import PynvmlBackend, pod_uid_from_cgroup
from horus_operator.agent.readings import NvmlUnavailableError

POD_UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
MIB = 1024 * 1024


@pytest.mark.parametrize(
    "cgroup",
    [
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-ab.scope\n",
        f"12:memory:/kubepods/besteffort/pod{POD_UID}/0123abcd\n11:cpu:/kubepods/besteffort/pod{POD_UID}/0123abcd\n",
    ],
)
def test_pod_uid_is_read_from_systemd_and_cgroupfs_paths(cgroup: str) -> None:
    assert pod_uid_from_cgroup(cgroup) == POD_UID


def test_a_host_process_has_no_pod() -> None:
    assert pod_uid_from_cgroup("0::/system.slice/sshd.service\n") is None


class FakeNvml:
    """Stands in for the pynvml module: two GPUs, one pod process on GPU 1. Row remapping (Ampere and
    later) and page retirement (Volta and earlier) report per GPU what `remapped` and `retiring` hold;
    None: the GPU does not support that check."""

    NVML_FEATURE_ENABLED = 1

    class NVMLError(Exception):
        pass

    class NVMLError_NotFound(NVMLError):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self) -> None:
        self.failing = False
        self.inits = 0
        self.remapped: dict[int, tuple[int, int, int, int] | None] = {0: None, 1: None}
        self.retiring: dict[int, int | None] = {0: 0, 1: 0}

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        if self.failing:
            raise self.NVMLError("GPU is lost")
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return f"GPU-{handle}".encode()

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "Tesla V100-SXM2-16GB"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=16384 * MIB, used=(handle + 1) * 1024 * MIB)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=40 * handle, memory=10)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        return [SimpleNamespace(pid=4242, usedGpuMemory=900 * MIB)] if handle == 1 else []

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        rows = self.remapped[handle]
        if rows is None:
            raise self.NVMLError_NotSupported()
        return rows

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        pending = self.retiring[handle]
        if pending is None:
            raise self.NVMLError_NotSupported()
        return pending

    def nvmlDeviceGetProcessUtilization(self, handle: int, since_us: int) -> list[Any]:
        if handle == 0:
            raise self.NVMLError_NotFound()
        return [
            SimpleNamespace(pid=4242, timeStamp=since_us + 1, smUtil=20, memUtil=5),
            SimpleNamespace(pid=4242, timeStamp=since_us + 2, smUtil=35, memUtil=5),
        ]


def cgroups(pid: int) -> str:
    return f"0::/kubepods/burstable/pod{POD_UID}/abc\n" if pid == 4242 else ""


def test_gpus_and_pod_processes_are_read_through_nvml() -> None:
    backend = PynvmlBackend(nvml=FakeNvml(), read_cgroup=cgroups)  # type: ignore[arg-type]

    sample = backend.sample([], now=3.0)

    assert [(g.index, g.uuid, g.memory_total_mib, g.memory_used_mib, g.utilization) for g in sample.gpus] == [
        (0, "GPU-0", 16384, 1024.0, 0.0),
        (1, "GPU-1", 16384, 2048.0, 0.4),
    ]
    (only,) = sample.processes
    assert (only.gpu_index, only.pid, only.pod_uid, only.memory_mib, only.utilization) == (
        1,
        4242,
        POD_UID,
        900.0,
        0.35,
    )


@pytest.mark.parametrize(
    ("remapped", "retiring", "healthy"),
    [
        (None, 0, True),  # Volta: no row remapping, no page waiting for retirement
        (None, 1, False),  # Volta: a page waits for retirement at the next reset
        ((3, 0, 0, 0), None, True),  # Ampere: corrected rows remapped already are fine
        ((0, 1, 1, 0), None, False),  # Ampere: a remapping waits for the next reset
        ((0, 0, 0, 1), None, False),  # Ampere: a remapping failed
        (None, None, True),  # neither check supported
    ],
)
def test_a_gpu_that_needs_a_reset_reads_unhealthy(
    remapped: tuple[int, int, int, int] | None, retiring: int | None, healthy: bool
) -> None:
    nvml = FakeNvml()
    nvml.remapped[1], nvml.retiring[1] = remapped, retiring
    backend = PynvmlBackend(nvml=nvml, read_cgroup=cgroups)  # type: ignore[arg-type]

    assert [g.healthy for g in backend.sample([], now=0.0).gpus] == [True, healthy]


def test_an_nvml_failure_is_reported_and_nvml_is_initialised_again_on_the_next_sample() -> None:
    nvml = FakeNvml()
    backend = PynvmlBackend(nvml=nvml, read_cgroup=cgroups)  # type: ignore[arg-type]
    backend.sample([], now=0.0)

    nvml.failing = True
    with pytest.raises(NvmlUnavailableError, match="GPU is lost"):
        backend.sample([], now=1.0)
    nvml.failing = False
    backend.sample([], now=2.0)

    assert nvml.inits == 2


def test_a_missing_nvml_library_is_reported_unavailable() -> None:
    pynvml = pytest.importorskip("pynvml")
    backend = PynvmlBackend(nvml=pynvml)

    with pytest.raises(NvmlUnavailableError):  # this machine has no NVIDIA driver
        backend.sample([], now=0.0)
