"""The real backend: NVIDIA's NVML through nvidia-ml-py (pynvml), processes mapped to pods by cgroup.

Needs the NVIDIA driver library on the node and, to map processes to pods, the host PID namespace
(`hostPID: true`) so that the PIDs NVML reports resolve under /proc. Any NVML failure becomes
`NvmlUnavailableError`; the next `sample` tries to initialise NVML again.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from horus_operator.agent.readings import GpuReading, NvmlUnavailableError, PodInfo, ProcessReading, Sample

_MIB = 1024 * 1024

# kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/... (systemd driver)
# or /kubepods/burstable/pod<uid>/<container> (cgroupfs driver)
_POD_UID_IN_CGROUP = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)


def pod_uid_from_cgroup(cgroup_text: str) -> str | None:
    """The pod UID in a /proc/<pid>/cgroup file, or None for a process outside any pod."""
    match = _POD_UID_IN_CGROUP.search(cgroup_text)
    return match.group(1).replace("_", "-") if match else None


def read_proc_cgroup(pid: int, proc_root: Path = Path("/proc")) -> str:
    try:
        return (proc_root / str(pid) / "cgroup").read_text()
    except OSError:  # the process ended, or is outside our PID namespace
        return ""


class PynvmlBackend:
    name = "nvml"

    def __init__(
        self, nvml: ModuleType | None = None, read_cgroup: Callable[[int], str] = read_proc_cgroup
    ) -> None:
        self._nvml = nvml
        self._read_cgroup = read_cgroup
        self._initialised = False
        self._last_process_sample_us = 0  # NVML returns per-process samples newer than this

    def sample(self, pods: Sequence[PodInfo], now: float) -> Sample:
        nvml = self._module()
        try:
            if not self._initialised:
                nvml.nvmlInit()
                self._initialised = True
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            gpus = tuple(self._gpu(nvml, i, h) for i, h in enumerate(handles))
            processes = tuple(p for i, h in enumerate(handles) for p in self._processes(nvml, i, h))
        except nvml.NVMLError as error:
            self.close()
            raise NvmlUnavailableError(f"NVML: {error}") from error
        return Sample(taken_at=now, gpus=gpus, processes=processes)

    def close(self) -> None:
        if self._initialised and self._nvml is not None:
            # shutting down a broken NVML: nothing left to release
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
        self._initialised = False

    def _module(self) -> ModuleType:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as error:
                raise NvmlUnavailableError("nvidia-ml-py is not installed") from error
            self._nvml = pynvml
        return self._nvml

    @staticmethod
    def _gpu(nvml: ModuleType, index: int, handle: Any) -> GpuReading:
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        return GpuReading(
            index=index,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            product=_text(nvml.nvmlDeviceGetName(handle)),
            memory_total_mib=int(memory.total // _MIB),
            memory_used_mib=memory.used / _MIB,
            utilization=rates.gpu / 100.0,
            memory_utilization=rates.memory / 100.0,
            healthy=_healthy(nvml, handle),
        )

    def _processes(self, nvml: ModuleType, index: int, handle: Any) -> list[ProcessReading]:
        memory_by_pid = {
            p.pid: (p.usedGpuMemory or 0) / _MIB for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        }
        utilization_by_pid: dict[int, float] = {}
        for sample in self._utilization_samples(nvml, handle):
            utilization_by_pid[sample.pid] = sample.smUtil / 100.0  # samples come oldest first
            self._last_process_sample_us = max(self._last_process_sample_us, sample.timeStamp)
        return [
            ProcessReading(
                gpu_index=index,
                pid=pid,
                pod_uid=pod_uid_from_cgroup(self._read_cgroup(pid)),
                memory_mib=memory_by_pid.get(pid, 0.0),
                utilization=utilization_by_pid.get(pid, 0.0),
            )
            for pid in sorted(memory_by_pid.keys() | utilization_by_pid.keys())
        ]

    def _utilization_samples(self, nvml: ModuleType, handle: Any) -> list[Any]:
        try:
            return list(nvml.nvmlDeviceGetProcessUtilization(handle, self._last_process_sample_us))
        except nvml.NVMLError_NotFound:  # no process ran since the last sample
            return []
        except nvml.NVMLError_NotSupported:  # older GPUs: memory per process still comes through
            return []


def _healthy(nvml: ModuleType, handle: Any) -> bool:
    """False when the GPU must be reset before it is trusted again: a memory row remapping is pending or
    failed (Ampere and later), or retired pages wait for the reset (Volta and earlier). NVIDIA's advice
    for both is to drain the GPU. A check the GPU does not support counts as passed."""
    try:
        _corrected, _uncorrected, pending, failed = nvml.nvmlDeviceGetRemappedRows(handle)
        if pending or failed:
            return False
    except nvml.NVMLError_NotSupported:
        pass
    try:
        return nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle) != nvml.NVML_FEATURE_ENABLED
    except nvml.NVMLError_NotSupported:
        return True


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
