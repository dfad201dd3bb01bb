"""What a job that ran out of GPU memory beside a co-tenant is placed as next: alone, its memory raised.

One rule for both shells, so the simulator's OOM restarts are the operator's. The operator reads the
raised memory back from the DLJob's status (`operator/jobs/reconcile.py` records it once, before the
retry's pod exists) and the simulator applies it when truth says a pair it started cannot share
(`sim/engine.py`). Who may be forgiven the failure (the first OOM while sharing; one alone is the job's
own) is the operator's bookkeeping: the simulator has no backoffLimit.

- The retry asks for GPUs of its own (maxSlowdown 1.0, which `index.wants_whole_gpus` reads): whoever
  took the memory, it is not there again. The co-tenant that stayed is not moved.
- Its peak memory is raised to at least what it reached: the agent's reading where there is one, else
  the prediction it was placed with times `MEMORY_FACTOR`, never less than what it was placed with
  before, and no more than the GPU it ran on holds (so it always fits a GPU like that one again). It is
  the workload's `peak_memory_mib`, which wins over the predicted envelope wherever it is placed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from horus_operator.placement.types import JobRequest

# The raise without an agent's reading: beyond the median under-prediction issue 45 measured (0.76 of
# the peak, RTX 3090). Alone the job has its whole GPU whatever this says: it is what Horus books for it.
MEMORY_FACTOR = 1.5


def raised_memory_mib(
    predicted_mib: float,
    *,
    reached_mib: float | None = None,
    before_mib: float | None = None,
    capacity_mib: float | None = None,
) -> float:
    """The peak memory (MiB, whole) a job that ran out of memory is placed with next: what it reached
    (`reached_mib`, the agent's reading) or `predicted_mib` × `MEMORY_FACTOR`, whichever is more, at most
    `capacity_mib` (its GPU's, where known), and never below `predicted_mib` nor `before_mib` (a raise
    recorded earlier)."""
    wanted = max(predicted_mib * MEMORY_FACTOR, reached_mib or 0.0)
    if capacity_mib:
        wanted = min(wanted, capacity_mib)
    return float(math.ceil(max(wanted, predicted_mib, before_mib or 0.0)))


def retried_alone(request: JobRequest, memory_mib: float) -> JobRequest:
    """`request` asking for GPUs of its own, its peak memory at least `memory_mib` wherever it goes."""
    peak = max(memory_mib, request.workload.peak_memory_mib or 0.0)
    return replace(request, max_slowdown=1.0, workload=replace(request.workload, peak_memory_mib=peak))
