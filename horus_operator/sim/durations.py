"""What the queue order knows of a simulated job's length: the truth, or what the operator would estimate.

The operator knows a job's length only as `spec.totalSteps` × its predicted step time, so a simulation
that orders by the true durations shows what an oracle would gain. `estimated` gives each job the
length the operator would: its true isolated duration × predicted step time / measured step time on
the scenario's GPU — the predictor's own error (`JobPrediction.step_s`) carried into the order. A job
whose step time either side lacks (a model the truth table never measured alone on that GPU, or a
predictor without a step model) has no known length, as a DLJob without `spec.totalSteps` would not.

Only the queue order reads these; the makespan guard keeps the trace's durations (`JobRequest.remaining_s`).
"""

from __future__ import annotations

from enum import StrEnum

from horus_operator.placement.queueorder import Remaining, known_remaining
from horus_operator.prediction.api import Predictor, UnknownGpuError, UnknownModelError
from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.workloads import Scenario, SimJob


class Durations(StrEnum):
    ESTIMATED = "estimated"
    TRUTH = "truth"


def remaining(durations: Durations, scenario: Scenario, table: TruthTable, predictor: Predictor) -> Remaining:
    """Where the queue order reads a waiting job's remaining work: jobs queue before they run (a job
    restarted after a crash made no progress), so remaining is the whole length."""
    if durations == Durations.TRUTH:
        return known_remaining
    estimates = {job.request.key: estimate_s(job, scenario.gpu, table, predictor) for job in scenario.jobs}
    return lambda request: estimates.get(request.key)


def estimate_s(job: SimJob, gpu: str, table: TruthTable, predictor: Predictor) -> float | None:
    """`job`'s length alone as the operator would predict it (None: it could not)."""
    workload = job.request.workload
    measured = table.isolated.get((gpu, workload.model, workload.batch_size))  # steps/s alone
    if measured is None:
        return None
    try:
        predicted_step_s = predictor.job(workload, gpu).step_s
    except (UnknownModelError, UnknownGpuError):
        return None
    return None if predicted_step_s is None else job.isolated_duration_s * predicted_step_s * measured
