"""CachedPredictions: answers are the predictor's, and a learning predictor's newer revision is never
served from an older cache (a job's utilization changes once jobs of its kind were seen alone)."""

from __future__ import annotations

from collections.abc import Sequence

from horus_operator.placement.predictions import CachedPredictions
from horus_operator.prediction.api import PREDICTED, PRIOR, Basis, JobPrediction, Workload


class Learner:
    """Answers a utilization that changes with what it has learned (`revision`)."""

    def __init__(self) -> None:
        self.revision, self.calls = 0, 0

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        self.calls += 1
        return JobPrediction(utilization=0.9 if self.revision == 0 else 0.1, memory_mib=1000.0)

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return tuple(1.0 for _ in workloads)

    def basis(self, gpu: str, workloads: Sequence[Workload]) -> tuple[Basis, ...]:
        return tuple(Basis(PRIOR, 0) for _ in workloads)

    def utilization_source(self, workload: Workload, gpu: str) -> str:
        return PREDICTED

    def spreads(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        return tuple(0.0 for _ in workloads)


def test_job_answers_are_cached_until_the_predictor_learns() -> None:
    learner = Learner()
    cached = CachedPredictions(learner)
    workload = Workload("resnet50", 64)
    assert cached.job(workload, "v100").utilization == cached.job(workload, "v100").utilization == 0.9
    assert learner.calls == 1
    learner.revision = 1
    assert cached.job(workload, "v100").utilization == 0.1
    assert learner.calls == 2


class Counting(Learner):
    """Records the order each group was asked in; answers a slowdown per framework."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, ...]] = []

    def slowdowns(
        self, gpu: str, workloads: Sequence[Workload], memory_mib: float | None = None
    ) -> tuple[float, ...] | None:
        self.asked.append(tuple(w.framework for w in workloads))
        return tuple(1.5 if w.framework == "tensorflow" else 1.2 for w in workloads)


def test_a_group_that_differs_only_in_framework_is_asked_once_whatever_its_order() -> None:
    learner = Counting()
    cached = CachedPredictions(learner)
    torch, tf = Workload("resnet50", 64), Workload("resnet50", 64, framework="tensorflow")
    assert cached.slowdowns("v100", [torch, tf], 16000.0) == (1.2, 1.5)
    assert cached.slowdowns("v100", [tf, torch], 16000.0) == (1.5, 1.2)
    assert learner.asked == [("pytorch", "tensorflow")]
