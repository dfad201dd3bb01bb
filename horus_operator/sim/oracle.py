"""A predictor that knows the truth: slowdowns from the truth table, the rest from a real predictor.

`horus simulate --decide-with truth` runs the policies on it, which measures how much of the gap to
an ideal scheduler is prediction error and how much is the policy itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.prediction.api import JobPrediction, Predictor, Workload
from horus_operator.sim.truth import Truth


class OraclePredictor:
    def __init__(self, truth: Truth, base: Predictor) -> None:
        self.truth = truth
        self.base = base

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return self.base.job(workload, gpu)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return self.truth.slowdowns(gpu, workloads, memory_mib).slowdowns
