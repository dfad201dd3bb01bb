"""`horus simulate --online-learning`: the simulator feeds the online correction (`prediction/correction.py`)
the way the operator's telemetry does, so the policy decides with the same `CorrectedPredictor`.

The engine reports a job's state (its co-tenants, and so its true slowdown) once it has held
`SETTLED_S` (`api/defaults.py`): the operator attributes a reported rate to a co-tenancy only after it
has held that long, and the two read the one constant.
The next decision, at that moment, uses the lesson. As in the cluster (docs/operator.md, "Online
correction"):
- a state alone tells the job's rate alone, for jobs of its signature on this GPU type
  (`Correction.note_alone`: the truth table's isolated throughput), and its GPU busy fraction alone
  where the table has one (`Correction.note_utilization`: its `util_*_alone` columns), which the
  prior then reads instead of the roofline's for jobs of that signature;
- a state next to exactly one co-tenant is learned once the job's rate alone is known, its own or its
  signature's; until then it waits, and is lost if the job ends first;
- one co-location (a job and one co-tenant) is learned once.
Where the truth table has no pair, the simulated world runs by the predictor that stands in for truth
(`--truth-models`), and that is what an agent in it would observe, so it is learned too; deciding and
standing in with the same models then teaches nothing there (residual 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Observation


@dataclass(frozen=True)
class Settled:
    """A running job whose state has held `SETTLED_S`, as the engine sees it at `at_s`."""

    key: str
    workload: Workload
    cotenants: tuple[tuple[str, Workload], ...]  # (key, workload) of the other jobs on its GPUs
    slowdown: float  # its true slowdown in this state
    steps_per_s_alone: float
    placed_s: float
    at_s: float
    busy_alone: float | None = None  # its GPU busy fraction alone, where truth measured it


class OnlineLearning:
    def __init__(self, predictor: CorrectedPredictor, gpu: str, memory_mib: float | None = None) -> None:
        self.predictor = predictor
        self.gpu, self.memory_mib = gpu, memory_mib
        self._waiting: dict[str, list[Observation]] = {}  # job key -> samples waiting for its alone rate
        self.learned: list[float] = []  # when each sample was learned (the learning curve)
        self.refused: dict[str, int] = {}  # why samples were refused, and how often

    def settled(self, state: Settled) -> None:
        correction = self.predictor.correction
        if not state.cotenants:
            correction.note_alone(self.gpu, state.workload, state.steps_per_s_alone)
            if state.busy_alone is not None:
                correction.note_utilization(self.gpu, state.workload, state.busy_alone)
            self._release(state.workload, state.at_s)
            return
        if len(state.cotenants) != 1:
            return
        ((other_key, other),) = state.cotenants
        observation = Observation(
            sample_id=f"{state.key}>{other_key}",
            gpu=self.gpu,
            workload=state.workload,
            cotenants=(other,),
            slowdown=state.slowdown,
            observed_at=state.at_s,
            placed_at=state.placed_s,
            memory_mib=self.memory_mib,
        )
        if correction.alone_rate(self.gpu, state.workload) is None:
            self._waiting.setdefault(state.key, []).append(observation)
        else:
            self._learn(observation, state.at_s)

    def finished(self, key: str) -> None:
        """The job ended: what still waited for its alone rate is never learned."""
        self._waiting.pop(key, None)

    def _release(self, workload: Workload, now: float) -> None:
        """Learn what waited for the alone rate of `workload`'s signature, now known."""
        for key in [k for k, waiting in self._waiting.items() if waiting[0].workload == workload]:
            for observation in self._waiting.pop(key):
                self._learn(observation, now)

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
