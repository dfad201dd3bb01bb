"""`horus simulate --online-learning`: the simulator feeds the online correction (`prediction/correction.py`)
the way the operator's telemetry does, so the policy decides with the same `CorrectedPredictor`.

The engine reports every finished interval of a job (a span in which its co-tenants, and so its true
slowdown, did not change). As in the cluster (docs/operator.md, "Online correction"):
- an interval counts only if it lasted `MIN_OBSERVED_S`: the operator attributes a reported rate to a
  co-tenancy only after it has held that long (`operator/observed.py`, STALE_RATE_SECONDS; the shells
  cannot import each other, hence the copy);
- a job's slowdown is only known once its alone rate is: an interval next to exactly one co-tenant is
  learned once the job has also run alone for such an interval, before or after (it waits until then,
  and is lost if the job never runs alone);
- one co-location (a job and one co-tenant) is learned once;
- only slowdowns the truth table measured are learned: where truth falls back to the predictor there
  is nothing real to learn from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Observation

MIN_OBSERVED_S = 60.0


@dataclass
class _Job:
    alone_seen: bool = False
    waiting: list[Observation] = field(default_factory=list)  # until its alone rate is known


@dataclass(frozen=True)
class Interval:
    """One finished span of a running job, as the engine books it."""

    key: str
    workload: Workload
    cotenants: tuple[tuple[str, Workload], ...]  # (key, workload) of the other jobs on its GPUs
    slowdown: float  # its true slowdown throughout
    measured: bool  # that slowdown came from the truth table
    placed_s: float
    start_s: float
    end_s: float


class OnlineLearning:
    def __init__(self, predictor: CorrectedPredictor, gpu: str, memory_mib: float | None = None) -> None:
        self.predictor = predictor
        self.gpu, self.memory_mib = gpu, memory_mib
        self._jobs: dict[str, _Job] = {}
        self.learned: list[float] = []  # when each sample was learned (the learning curve)
        self.refused: dict[str, int] = {}  # why samples were refused, and how often

    def interval(self, span: Interval) -> None:
        if span.end_s - span.start_s < MIN_OBSERVED_S:
            return
        job = self._jobs.setdefault(span.key, _Job())
        if not span.cotenants:
            job.alone_seen = True
            for waiting in job.waiting:
                self._learn(waiting, span.end_s)
            job.waiting.clear()
            return
        if len(span.cotenants) != 1 or not span.measured:
            return
        ((other_key, other),) = span.cotenants
        observation = Observation(
            sample_id=f"{span.key}>{other_key}",
            gpu=self.gpu,
            workload=span.workload,
            cotenants=(other,),
            slowdown=span.slowdown,
            observed_at=span.end_s,
            placed_at=span.placed_s,
            memory_mib=self.memory_mib,
        )
        if job.alone_seen:
            self._learn(observation, span.end_s)
        else:
            job.waiting.append(observation)

    def finished(self, key: str) -> None:
        """The job ended: what still waited for its alone rate is never learned."""
        self._jobs.pop(key, None)

    def _learn(self, observation: Observation, now: float) -> None:
        refused = self.predictor.learn(observation)
        if refused is None:
            self.learned.append(now)
        else:
            self.refused[refused] = self.refused.get(refused, 0) + 1

    def summary(self) -> dict[str, object]:
        return {
            "samples_learned": len(self.learned),
            "samples_refused": dict(self.refused),
            "correction_entries": len(self.predictor.correction),
        }


def cotenants_of(key: str, tenants: Sequence[tuple[str, Workload]]) -> tuple[tuple[str, Workload], ...]:
    """The other jobs among `tenants` (over all of a job's GPUs), each once, in order."""
    return tuple(dict((k, w) for k, w in tenants if k != key).items())
