"""What the queue order knows of a simulated job's length: the truth, or what the operator would estimate.

The operator knows a job's length only as `spec.totalSteps` × its predicted step time, so a simulation
that orders by the true durations shows what an oracle would gain. `estimated` gives each job the
length the operator would: its steps × the predicted step time on the scenario's GPU
(`JobPrediction.step_s`), so the predictor's own error is carried into the order. The steps are the
trace's where it gives them (Muri's iterations; their time was measured on Muri's own GPUs, so that
estimate also carries the difference between those and the scenario's), else the true isolated
duration at the truth table's measured rate alone. A job with neither (a model the truth table never
measured alone on that GPU, in a trace without steps), or whose predictor has no step model, has no
known length, as a DLJob without `spec.totalSteps` would not.

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
    """`job`'s length alone as the operator would predict it (None: it could not): the trace's steps,
    else its true length at the truth table's measured rate alone, at the predicted step time."""
    workload = job.request.workload
    try:
        predicted_step_s = predictor.job(workload, gpu).step_s
    except (UnknownModelError, UnknownGpuError):
        return None
    if predicted_step_s is None:
        return None
    if job.trace_steps is not None:
        return job.trace_steps * predicted_step_s
    measured = table.isolated.get((gpu, workload.model, workload.batch_size))  # steps/s alone
    return None if measured is None else job.isolated_duration_s * predicted_step_s * measured
