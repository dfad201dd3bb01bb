"""The makespan guard: a job whose remaining work sets when the cluster can finish is not slowed.

Sharing a GPU trades each job's speed for the cluster's throughput. For most jobs that pays, but a job
whose remaining work alone reaches the *horizon* — the earliest time all known work could be done,
`now + max(longest remaining, remaining GPU-work / GPUs)` — moves the makespan by every hour it is
slowed (Gavel's generator traces: a 141 h job paired late and never un-paired ran 123 h at up to
1.8×). So at placement a job may be slowed only as far as it still ends by the horizon: its
maxSlowdown is capped at (horizon - now) / remaining, and a cap under `SHARING_FLOOR` becomes 1.0 (a
whole GPU). The capped request is the one placed, so later newcomers respect the cap too.

When it applies (measured on gavel-generator and horus-2500, docs/evaluation.md):
- only with a horizon (`ClusterSnapshot.horizon_s`): the caller must know the jobs' remaining work
  and that no more is coming. The simulator passes one once its trace has fully arrived; with work
  still arriving, the known work understates the makespan and caps bind for nothing (horus-2500's
  makespan went from 0.765× to 0.80× exclusive with the guard on throughout);
- only while an empty GPU exists (`SchedulingCycle.run`): a job capped to a whole GPU with none free
  waits, and waiting delays it more than sharing would.
"""

from __future__ import annotations

import dataclasses
import math

from horus_operator.placement.types import JobRequest

# Caps are rounded down to this step: jobs alike stay alike for the policies' memoised verdicts.
CAP_STEP = 0.05
# A cap below this means "never share": half of Gavel's measured V100 pairs slow a job by more (median
# 1.47×), so a tighter cap rarely finds a partner, and saying so lets the job take an empty GPU as a
# loner at once (the policy starts loners first) instead of waiting for a partner that never comes.
SHARING_FLOOR = 1.5


def horizon_s(now: float, work_left_gpu_s: float, gpus: int, longest_remaining_s: float) -> float:
    """The earliest time all known work could be done: no job finishes before its own remaining work
    alone, and the GPUs cannot do the remaining GPU-work faster than one job each."""
    return now + max(longest_remaining_s, work_left_gpu_s / max(gpus, 1))


def guarded(request: JobRequest, now: float, horizon: float | None) -> JobRequest:
    """`request`, its maxSlowdown capped so that, slowed by at most the cap, it still ends by `horizon`."""
    if horizon is None or not request.remaining_s or request.max_slowdown <= 1.0:
        return request
    tolerable = (horizon - now) / request.remaining_s
    if tolerable >= request.max_slowdown:
        return request
    # The epsilon keeps an exact multiple (1.9 = 38 × 0.05 in floating point: 37.99…) on its step.
    capped = round(math.floor(tolerable / CAP_STEP + 1e-9) * CAP_STEP, 2)
    return dataclasses.replace(request, max_slowdown=capped if capped >= SHARING_FLOOR else 1.0)
