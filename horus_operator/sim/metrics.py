"""Per-policy metrics of a run, with exactly the keys `summary.json` promises other tools.

- `makespan_s`: first arrival to last completion.
- `mean_jct_s`, `p50_jct_s`, `p99_jct_s`: job completion time = completion - arrival (linear-interpolated
  percentiles).
- `mean_wait_s`: first start - arrival.
- `gpu_busy_fraction`: GPU-seconds with at least one job / (GPU count x makespan).
- `normalised_throughput_per_gpu`: over busy GPU-time, the sum over a GPU's co-tenants of shared/alone
  throughput (1.0 for a job alone; above 1.0 when sharing pays).
- `qos_violations`: jobs whose true slowdown exceeded their maxSlowdown at any time.
- `lower_bound_makespan_s`: the best makespan any one-job-per-GPU schedule could reach,
  max(total isolated GPU-seconds / GPU count, max over jobs of arrival + isolated duration).
- `truth_coverage`: share of co-located job-time whose slowdowns came from measured pairs rather than
  the predictor (1.0 when nothing was co-located).

`details.json` adds, per policy, `over_limit_job_hours` (job-time spent with a true slowdown above
maxSlowdown: what moving a job off a bad pairing shortens, though the job still counts as a QoS
violation), `migration` with `--migration` (moves made, by trigger), and `quarters`: the jobs that
ran, in arrival order, cut into four equal shares (the learning curve of `--online-learning`): per
quarter its jobs, QoS violations and their rate, mean JCT, and span (its first arrival to its last
completion).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from horus_operator.sim.results import JobRecord, RunResult
from horus_operator.sim.workloads import Scenario

SUMMARY_KEYS = (
    "jobs",
    "makespan_s",
    "mean_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "mean_wait_s",
    "gpu_busy_fraction",
    "normalised_throughput_per_gpu",
    "qos_violations",
    "lower_bound_makespan_s",
    "truth_coverage",
)
QOS_TOLERANCE = 1e-9


def lower_bound_makespan_s(scenario: Scenario, rejected: Collection[str] = ()) -> float:
    """Over the jobs that can run: those the scheduling cycle `rejected` (no node fits) never start."""
    jobs = [job for job in scenario.jobs if job.request.key not in rejected]
    work = sum(job.isolated_duration_s * job.request.gpus for job in jobs) / scenario.gpu_count
    first = min(job.arrival_s for job in jobs)
    latest = max(job.arrival_s + job.isolated_duration_s for job in jobs)
    return max(work, latest - first)


def summarise(result: RunResult, scenario: Scenario) -> dict[str, Any]:
    records = result.records
    jct = np.array([record.jct_s for record in records])
    first_arrival = min(record.arrival_s for record in records)
    makespan = max(record.finish_s for record in records) - first_arrival
    return {
        "jobs": len(records),
        "makespan_s": makespan,
        "mean_jct_s": float(jct.mean()),
        "p50_jct_s": float(np.percentile(jct, 50)),
        "p99_jct_s": float(np.percentile(jct, 99)),
        "mean_wait_s": float(np.mean([record.wait_s for record in records])),
        "gpu_busy_fraction": result.busy_gpu_s / (scenario.gpu_count * makespan) if makespan else 0.0,
        "normalised_throughput_per_gpu": (
            result.throughput_gpu_s / result.busy_gpu_s if result.busy_gpu_s else 0.0
        ),
        "qos_violations": sum(_violated(record) for record in records),
        "lower_bound_makespan_s": lower_bound_makespan_s(scenario, result.rejected),
        "truth_coverage": result.measured_colocated_s / result.colocated_s if result.colocated_s else 1.0,
    }


def _violated(record: JobRecord) -> bool:
    return record.worst_true_slowdown > record.max_slowdown + QOS_TOLERANCE


def quarters(records: Sequence[JobRecord]) -> list[dict[str, float]]:
    ordered = sorted(records, key=lambda r: (r.arrival_s, r.key))
    cuts = [round(len(ordered) * q / 4) for q in range(5)]
    parts = [ordered[start:end] for start, end in itertools.pairwise(cuts)]
    return [
        {
            "jobs": len(part),
            "qos_violations": sum(_violated(r) for r in part),
            "qos_violation_rate": sum(_violated(r) for r in part) / len(part),
            "mean_jct_s": float(np.mean([r.jct_s for r in part])),
            "span_s": max(r.finish_s for r in part) - min(r.arrival_s for r in part),
        }
        for part in parts
        if part
    ]


def details(result: RunResult) -> dict[str, Any]:
    """What summary.json has no key for: co-location volume, restarts after true OOMs, and the jobs no
    node could ever run (rejected by the scheduling cycle, as the operator fails them)."""
    return {
        "colocated_job_hours": result.colocated_s / 3600.0,
        "oom_restarts": sum(record.oom_restarts for record in result.records),
        "jobs_colocated": sum(record.colocated_s > 0 for record in result.records),
        "mean_true_slowdown": float(
            np.mean([(r.finish_s - r.start_s) / r.isolated_s for r in result.records if r.isolated_s > 0])
        ),
        "rejected": dict(result.rejected),
        "over_limit_job_hours": sum(record.over_limit_s for record in result.records) / 3600.0,
        "quarters": quarters(result.records),
        **({"migration": result.migration} if result.migration else {}),
        **({"preemption": result.preemption} if result.preemption else {}),
    }
