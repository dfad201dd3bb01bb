"""`horus simulate --migration`: running jobs move as the operator moves them, by the same planner
(`placement/moves.py`, through `SchedulingCycle.moves`), after every decision round.

What the simulator assumes, since traces carry no migration allowance:
- every job allows moving (`spec.migration.allowed: true` for all), with a grace period of
  `grace_period_s` (default 30 s, the DLJob default) and a restart cost of `MoveSettings.restart_cost_s`
  (default 120 s; `--restart-cost-seconds`);
- the observed slowdown the planner reads is the truth's, since the job's co-tenants last changed (an
  agent would report it about a minute later; the planner waits `MoveSettings.violation_wait_s` anyway,
  the settling time and as many readings as the noise asks);
- remaining work is exact (the trace's duration less the progress made).

A move (`Simulation`): the job stops with its progress kept (it checkpoints on SIGTERM), leaves its GPU
and takes the target at once, and makes no progress for the grace period plus the restart cost; the
co-tenants of both GPUs are re-rated. Simplifications: its old co-tenants speed up at once rather than
after the grace period, and the cluster's normalised throughput counts the job as running while it
restarts. A move onto a GPU where truth says the jobs cannot share (out of memory) is not made and is
counted (`refused_by_truth`): the operator would see the new pod crash and place the job again whole,
a path the simulator does not model.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from horus_operator.placement.base import TOLERANCE
from horus_operator.placement.moves import Mobility, Move, MoveSettings

DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class MoveRecord:
    at_s: float
    job: str
    trigger: str
    source: str  # node/GPU
    target: str
    reason: str


class Migration:
    def __init__(self, settings: MoveSettings | None = None, grace_period_s: float = DEFAULT_GRACE_S) -> None:
        self.settings = settings or MoveSettings()
        self.grace_period_s = grace_period_s
        self.made: list[MoveRecord] = []
        self.refused_by_truth = 0
        self._moves: dict[str, int] = {}
        self._last_move: dict[str, float] = {}
        self._checks: list[tuple[float, int]] = []  # when a job over its limit may be moved
        self._sequence = itertools.count()

    def rated(self, key: str, slowdown: float, limit: float, now: float) -> None:
        """A job's true slowdown changed: if it is over its limit, wake the simulation once the planner
        may move it (the settable time, and its cooldown, after now)."""
        if slowdown <= limit + TOLERANCE or self._moves.get(key, 0) >= self.settings.max_moves_per_job:
            return
        due = now + self.settings.violation_wait_s(slowdown, limit)
        last = self._last_move.get(key)
        if last is not None:
            due = max(due, last + self.settings.cooldown_s)
        heapq.heappush(self._checks, (due, next(self._sequence)))

    def next_check_s(self) -> float:
        return self._checks[0][0] if self._checks else float("inf")

    def checked(self, now: float) -> None:
        """Drop the wake-ups due by `now` (the decision round at `now` looks at every job)."""
        while self._checks and self._checks[0][0] <= now:
            heapq.heappop(self._checks)

    def mobility(
        self, key: str, *, limit: float, slowdown: float, since: float, remaining_s: float
    ) -> Mobility:
        return Mobility(
            allowed=True,
            grace_period_s=self.grace_period_s,
            max_slowdown=limit,
            observed_slowdown=slowdown,
            observed_since=since,
            remaining_s=remaining_s,
            moves=self._moves.get(key, 0),
            last_move_at=self._last_move.get(key),
        )

    def moved(self, move: Move, now: float) -> None:
        self._moves[move.job] = self._moves.get(move.job, 0) + 1
        self._last_move[move.job] = now
        source, target = move.source, move.target
        self.made.append(
            MoveRecord(
                at_s=now,
                job=move.job,
                trigger=move.trigger,
                source=f"{source.node}/{','.join(map(str, source.gpu_indices))}",
                target=f"{target.node}/{','.join(map(str, target.gpu_indices))}",
                reason=move.reason,
            )
        )

    def moves_of(self, key: str) -> int:
        return self._moves.get(key, 0)

    def summary(self) -> dict[str, object]:
        by_trigger: dict[str, int] = {}
        for record in self.made:
            by_trigger[record.trigger] = by_trigger.get(record.trigger, 0) + 1
        return {
            "moves": len(self.made),
            "by_trigger": by_trigger,
            "jobs_moved": len(self._moves),
            "refused_by_truth": self.refused_by_truth,
            "grace_period_s": self.grace_period_s,
            "restart_cost_s": self.settings.restart_cost_s,
        }
