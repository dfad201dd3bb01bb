"""`horus simulate --queue-order las`: running jobs preempted back into the queue, by the shared cycle's
rule (`placement/preemption.py`, through `SchedulingCycle.preemptions`), after every decision round.

A preemption (`Simulation`): the job stops with its progress kept (it checkpoints on the stop), leaves
its GPUs at once and queues again with its attained GPU-service counted (GPUs × the time it ran, over
all its runs) and its remaining work as what is left; its wait for the starvation bound counts from
then. When it starts again, anywhere, it makes no progress for the grace period plus the restart cost
(`PreemptionSettings.cost_s`, the migration model's cost: `sim/migration.py`). Its record keeps its
first start (its wait is until it first ran) and its whole progress. Simplifications as for moves: the
grace period is paid on the restart, not while it still holds its GPUs.

The job it was preempted for starts on the GPUs emptied for it (`Preemption.target`) where it still fits
there (`SchedulingCycle.retarget`, the placement a move's target gets), else the cycle places whatever
it places next. Every job may be preempted: traces carry no allowance, as for `--migration`.

Events: a running job becomes preemptable once it has run `PreemptionSettings.protected_s` since its
(re)start and crossed a level threshold (`queueorder.LAS_LEVELS_GPU_S`); the simulation wakes then
(`next_check_s`) as it does for arrivals and completions.
"""

from __future__ import annotations

import heapq
import itertools

from horus_operator.placement.preemption import Preemption, PreemptionSettings
from horus_operator.placement.queueorder import LAS_LEVELS_GPU_S


class Preempting:
    def __init__(self, settings: PreemptionSettings | None = None) -> None:
        self.settings = settings or PreemptionSettings()
        self.made: list[tuple[float, Preemption]] = []
        self._count: dict[str, int] = {}
        self._checks: list[tuple[float, int]] = []
        self._sequence = itertools.count()

    def started(self, now: float, attained_gpu_s: float, gpus: int) -> None:
        """A job (re)started at `now` with `attained_gpu_s` so far: wake when it may first be preempted
        and again as it crosses each level threshold after that."""
        protected_until = now + self.settings.protected_s
        for threshold in LAS_LEVELS_GPU_S:
            crosses = now + max(0.0, threshold - attained_gpu_s) / gpus
            heapq.heappush(self._checks, (max(protected_until, crosses), next(self._sequence)))

    def next_check_s(self) -> float:
        return self._checks[0][0] if self._checks else float("inf")

    def checked(self, now: float) -> None:
        """Drop the wake-ups due by `now` (the decision round at `now` looks at every job)."""
        while self._checks and self._checks[0][0] <= now:
            heapq.heappop(self._checks)

    def preempted(self, preemption: Preemption, now: float) -> None:
        self._count[preemption.job] = self._count.get(preemption.job, 0) + 1
        self.made.append((now, preemption))

    def count(self, key: str) -> int:
        return self._count.get(key, 0)

    def summary(self) -> dict[str, object]:
        return {
            "preemptions": len(self.made),
            "jobs_preempted": len(self._count),
            "most_of_one_job": max(self._count.values(), default=0),
            "cost_s": self.settings.cost_s,
            "protected_s": self.settings.protected_s,
        }
