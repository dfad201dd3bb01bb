"""Whether a DLJob's pod ended out of GPU memory, beside whom, and what its status records of it.

Pure. Horus's containers report their log tail as their termination message when they fail without
writing one (`terminationMessagePolicy: FallbackToLogsOnError`, `pods.build_pod`), so the framework's
last words are on the pod: `signature` finds a CUDA, PyTorch, TensorFlow, JAX or NCCL out-of-memory
error there. No exit code is read: a framework exits 1 on an uncaught OOM, as on any error, and 137
(`OOMKilled`) is the host's memory, which more GPU memory would not help. Nor is an OOM inferred from
the node agent's readings, every few seconds, too coarse to catch the moment a GPU filled; its last
reading of the job's memory (`status.observed.memoryMiB`) is what the job is known to have reached.

The rule (`placement/oom.py`): the first pod that ends out of memory while another job held one of its
GPUs is not counted against backoffLimit; the job is retried alone, its memory raised. The status
records that once (`recorded`), before the retry's pod exists, so a restarted operator forgives the
same pod and places the job as before; a later OOM, alone, is the job's own and counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from horus_operator.placement import oom
from horus_operator.placement.types import JobRequest

if TYPE_CHECKING:  # both import pods.py, which reads `pod_signature` into each PodView
    from horus_operator.operator.cluster_view import NodeView
    from horus_operator.operator.jobs.pods import PodView

REASON = "OutOfMemory"  # the conditions' reason, and the Event's
CONDITION = "MemoryRaised"  # the DLJob condition that says why the job now runs alone
RECOVERIES = "oomRecoveries"  # status: how many OOM endings were forgiven (the job retried alone)
RECOVERY = "oomRecovery"  # status: the latest of them (pod, co-tenants, raised memory, why)

# The frameworks' words for running out of GPU memory, as their errors print them (case ignored).
_SIGNATURE = re.compile(
    "|".join(
        (
            # PyTorch's "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ..."
            # (torch.cuda.OutOfMemoryError in older releases), CuPy's cupy.cuda.memory.OutOfMemoryError
            r"CUDA out of memory",
            r"(?:torch|cupy)[\w.]*\.OutOfMemoryError",
            # TensorFlow's "RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[...]"; XLA's (JAX)
            # "RESOURCE_EXHAUSTED: Out of memory while trying to allocate ..."
            r"OOM when allocating",
            r"RESOURCE_EXHAUSTED:\s*Out of memory",
            # the CUDA libraries', runtime's and driver's error names
            r"CU(?:BLAS|DNN|FFT|SPARSE|SOLVER)_STATUS_ALLOC_FAILED",
            r"cudaErrorMemoryAllocation",
            r"CUDA_ERROR_OUT_OF_MEMORY",
            # "RuntimeError: CUDA error: out of memory", NCCL's "Cuda failure 'out of memory'"
            r"(?:CUDA|NCCL)[^\n]{0,80}?out of memory",
        )
    ),
    re.IGNORECASE,
)


def signature(text: str) -> str:
    """The out-of-GPU-memory error `text` shows (a termination message, a log tail) as it says it, ""
    for none."""
    found = _SIGNATURE.search(text)
    return found.group(0) if found else ""


def pod_signature(status: Mapping[str, Any]) -> str:
    """The out-of-GPU-memory error a pod's ended containers (init containers too) report, "" for none."""
    for kind in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(kind) or []:
            terminated = (container.get("state") or {}).get("terminated") or {}
            found = signature(str(terminated.get("message") or ""))
            if found:
                return found
    return ""


@dataclass(frozen=True)
class Ending:
    """A pod of the job that ended out of GPU memory, as the cluster shows it."""

    pod: PodView
    beside: tuple[str, ...]  # the other jobs (keys) that held one of its GPUs while it ran
    reached_mib: float | None  # its memory at the agent's last reading, where an agent reported
    capacity_mib: float | None  # the memory of the GPUs it ran on (the least), where the node says

    def raised_mib(self, before_mib: float | None) -> float:
        predicted = float(self.pod.predicted.get("memoryMiB") or 0.0)
        return oom.raised_memory_mib(
            predicted, reached_mib=self.reached_mib, before_mib=before_mib, capacity_mib=self.capacity_mib
        )


def ending(
    job_pods: Sequence[PodView],
    current: Mapping[str, Any],
    others: Callable[[], Iterable[PodView]],
    nodes: Mapping[str, NodeView],
) -> Ending | None:
    """How the job's newest pod ended, where it failed out of memory and the status records no
    recovery yet (the rule forgives once: one recorded needs nothing more read). `others`: every Horus
    pod, read only then; `nodes`: the cluster's, for the memory of the GPUs it ran on."""
    pod = max((p for p in job_pods if not p.deleting), key=lambda p: p.attempt, default=None)
    if pod is None or pod.phase != "Failed" or not pod.out_of_memory or current.get(RECOVERY):
        return None
    observed = current.get("observed") or {}
    node = nodes.get(pod.node)
    gpus = [g for g in node.labelled.gpus if g.index in pod.gpu_indices] if node and node.labelled else []
    return Ending(
        pod=pod,
        beside=beside(pod, others(), observed),
        reached_mib=float(observed["memoryMiB"]) if observed.get("memoryMiB") else None,
        capacity_mib=min((g.memory_mib for g in gpus), default=None),
    )


def beside(pod: PodView, others: Iterable[PodView], observed: Mapping[str, Any]) -> tuple[str, ...]:
    """The jobs that shared a GPU with `pod` while it ran: placed beside it (its colocated annotation),
    seen beside it by the agent (`status.observed.sharingWith`), or whose pods held one of its GPUs
    while it ran (a pod's run: from its start, else its creation, to its end, else now)."""
    keys = {*pod.colocated_with, *(observed.get("sharingWith") or ())}
    began, ended = pod.started_at or pod.created_at, pod.finished_at
    for other in others:
        if other.job_key == pod.job_key or other.node != pod.node:
            continue
        if not set(other.gpu_indices) & set(pod.gpu_indices):
            continue
        other_began = other.started_at or other.created_at
        if ended is not None and other_began is not None and other_began > ended:
            continue
        if began is not None and other.finished_at is not None and other.finished_at < began:
            continue
        keys.add(other.job_key)
    keys.discard(pod.job_key)
    return tuple(sorted(keys))


def forgiven(current: Mapping[str, Any]) -> str:
    """The pod whose out-of-memory ending the status records as forgiven ("" for none)."""
    return str((current.get(RECOVERY) or {}).get("pod") or "")


def raised_mib(current: Mapping[str, Any]) -> float | None:
    """The memory the job is placed with since it ran out of memory (None: never did)."""
    memory = (current.get(RECOVERY) or {}).get("memoryMiB")
    return float(memory) if memory else None


def as_recorded(request: JobRequest, current: Mapping[str, Any]) -> JobRequest:
    """The job's request as its status says it is placed since it ran out of memory (unchanged where it
    never did): alone, its memory raised (`placement/oom.py`, the rule the simulator runs too)."""
    memory = raised_mib(current)
    return request if memory is None else oom.retried_alone(request, memory)


def recorded(current: Mapping[str, Any], ending: Ending, at: str) -> dict[str, Any]:
    """`current`'s fields that record `ending` as forgiven: one recovery more, and this one."""
    memory = ending.raised_mib(raised_mib(current))
    return {
        RECOVERIES: int(current.get(RECOVERIES) or 0) + 1,
        RECOVERY: {
            "pod": ending.pod.name,
            "beside": list(ending.beside),
            "signature": ending.pod.out_of_memory,
            "memoryMiB": memory,
            **({"reachedMiB": round(ending.reached_mib)} if ending.reached_mib else {}),
            "at": at,
        },
    }


def message(recovery: Mapping[str, Any], backoff_limit: int) -> str:
    """What the status and the Event say of a recorded recovery."""
    return (
        f"pod {recovery.get('pod')} ran out of GPU memory ({recovery.get('signature')}) beside "
        f"{', '.join(recovery.get('beside') or ())}: retried alone with {recovery.get('memoryMiB'):.0f} MiB, "
        f"not counted against backoffLimit {backoff_limit}"
    )
