"""The lengths the simulator's queue order reads: the truth, or the operator's estimate."""

from __future__ import annotations

from pathlib import Path

from sim_builders import truth_table

from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import JobPrediction, Workload
from horus_operator.sim.durations import Durations, estimate_s, remaining
from horus_operator.sim.workloads import Scenario, SimJob, cluster


def sim_job(key: str, model: str, steps: float, steps_per_s: float) -> SimJob:
    request = JobRequest(key, Workload(model, 1), remaining_s=steps / steps_per_s)
    return SimJob(request, total_steps=steps, steps_per_s_alone=steps_per_s)


class Stepping:
    """A predictor that knows a step time per model (the estimate asks nothing else)."""

    def __init__(self, step_s: dict[str, float]) -> None:
        self.step_s = step_s

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        return JobPrediction(utilization=0.5, memory_mib=1000.0, step_s=self.step_s.get(workload.model))


def test_the_estimate_is_steps_at_the_predicted_step_time(tmp_path: Path) -> None:
    table = truth_table(tmp_path)  # a: 10 steps/s alone on v100
    job = sim_job("j", "a", steps=1000.0, steps_per_s=10.0)  # 100 s in truth
    assert estimate_s(job, "v100", table, Stepping({"a": 0.2})) == 200.0  # 1000 steps x 0.2 s


def test_no_estimate_without_a_step_model_or_a_measured_step(tmp_path: Path) -> None:
    table = truth_table(tmp_path)
    assert estimate_s(sim_job("j", "a", 10.0, 10.0), "v100", table, Stepping({})) is None
    assert estimate_s(sim_job("j", "a", 10.0, 10.0), "p100", table, Stepping({"a": 0.1})) is None


def test_truth_reads_the_requests_own_length(tmp_path: Path) -> None:
    job = sim_job("j", "a", steps=1000.0, steps_per_s=10.0)
    scenario = Scenario("s", (job,), cluster(4), "v100")
    table = truth_table(tmp_path)
    assert remaining(Durations.TRUTH, scenario, table, Stepping({"a": 0.2}))(job.request) == 100.0
    assert remaining(Durations.ESTIMATED, scenario, table, Stepping({"a": 0.2}))(job.request) == 200.0


def test_a_trace_that_gives_steps_is_estimated_from_them_without_the_truth_table(tmp_path: Path) -> None:
    """Muri's iterations: what a DLJob's spec.totalSteps would say, whatever the table measured."""
    table = truth_table(tmp_path)  # measured nothing of model "b"
    timed = SimJob(JobRequest("j", Workload("b", 1), remaining_s=50.0), 50.0, 1.0, trace_steps=400.0)
    assert estimate_s(timed, "v100", table, Stepping({"b": 0.5})) == 200.0  # 400 steps x 0.5 s
    assert estimate_s(timed, "v100", table, Stepping({})) is None
