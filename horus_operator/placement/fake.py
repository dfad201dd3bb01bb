"""A predictor answering from hand-written tables, for tests and worked examples.

`TablePredictor(jobs={model: (utilization, memory_mib)}, pairs={(model_a, model_b): (s_a, s_b)})` keys
by model name only (batch size and GPU type are ignored). A pair missing from `pairs` is infeasible;
more than two jobs combine additively (1 + sum of pairwise excess), like the simulator's truth. A
workload's measured peak (`Workload.peak_memory_mib`) wins over the table's memory, as it does over
the real predictor's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from horus_operator.prediction.api import JobPrediction, Workload


class TablePredictor:
    def __init__(
        self,
        jobs: Mapping[str, tuple[float, float]],
        pairs: Mapping[tuple[str, str], tuple[float, float]],
    ) -> None:
        self._jobs = dict(jobs)
        self._pairs: dict[tuple[str, str], tuple[float, float]] = {}
        for (a, b), (slowdown_a, slowdown_b) in pairs.items():
            self._pairs[(a, b)] = (slowdown_a, slowdown_b)
            self._pairs[(b, a)] = (slowdown_b, slowdown_a)
        self.calls = 0  # how many questions reached the table (tests check memoisation with it)

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        self.calls += 1
        utilization, memory_mib = self._jobs[workload.model]
        peak = workload.peak_memory_mib
        return JobPrediction(utilization=utilization, memory_mib=memory_mib if peak is None else peak)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        """From the pair table alone: memory is the policies' own check."""
        self.calls += 1
        answer = []
        for i, workload in enumerate(workloads):
            excess = 0.0
            for j, other in enumerate(workloads):
                if i == j:
                    continue
                pair = self._pairs.get((workload.model, other.model))
                if pair is None:
                    return None
                excess += pair[0] - 1.0
            answer.append(1.0 + excess)
        return tuple(answer)
