"""Headroom from the memory prediction's uncertainty (issue 45, item 4): an unproven job shares a GPU
only where its upper memory bound fits; a proven one (its peak observed) packs to that peak plus a
small margin; alone on an empty GPU a job keeps today's rule. Memories are hand-made inputs."""

from __future__ import annotations

import dataclasses

import pytest

from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node, RunningJob
from horus_operator.prediction import memory_spread
from horus_operator.prediction.api import JobPrediction, Workload

GPU_MIB = 24576  # a 24 GB card
TENANT = Workload("tenant", 8, peak_memory_mib=8000.0)  # proven: its peak observed
NEWCOMER = Workload("newcomer", 8)  # unproven: its memory from its config's terms
POINT_MIB = 14000.0  # fits beside the tenant (with the 500 MiB margin); its upper bound does not


class SourcedPredictor(TablePredictor):
    """The table's answers, memory from a job's stated terms unless its peak was observed."""

    def job(self, workload: Workload, gpu: str) -> JobPrediction:
        source = memory_spread.CONFIG if workload.peak_memory_mib is None else memory_spread.OBSERVED
        return dataclasses.replace(super().job(workload, gpu), memory_source=source)


def _predictor() -> SourcedPredictor:
    jobs = {"tenant": (0.3, 8000.0), "newcomer": (0.3, POINT_MIB)}
    return SourcedPredictor(jobs, {("tenant", "newcomer"): (1.05, 1.05)})


def _cluster(*running: RunningJob) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=(Node("n0", (Gpu("n0", 0, "rtx-3090", GPU_MIB),)),), running=running)


def _beside_the_tenant(workload: Workload) -> list[str]:
    tenant = RunningJob(JobRequest("ns/tenant", TENANT, max_slowdown=2.0), "n0", (0,))
    policy = make_policy("horus", predictor=_predictor())
    return [
        a.job for a in policy.schedule(_cluster(tenant), [JobRequest("ns/new", workload, max_slowdown=2.0)])
    ]


def test_the_upper_bound_is_the_prediction_times_its_sources_factor() -> None:
    unproven = JobPrediction(utilization=0.3, memory_mib=POINT_MIB, memory_source=memory_spread.CONFIG)
    proven = dataclasses.replace(unproven, memory_source=memory_spread.OBSERVED)
    factor = memory_spread.MEMORY_SPREADS[memory_spread.CONFIG].upper_factor()

    assert memory_spread.sharing_memory_mib(unproven) == pytest.approx(POINT_MIB * factor)
    assert POINT_MIB < memory_spread.sharing_memory_mib(proven) < 1.01 * POINT_MIB  # peak + a small margin
    unstated = dataclasses.replace(unproven, memory_source="")
    assert memory_spread.sharing_memory_mib(unstated) == POINT_MIB  # a predictor that names no source


def test_an_unproven_job_is_refused_beside_a_tenant_where_only_its_point_prediction_fits() -> None:
    assert 8000.0 + POINT_MIB + 500.0 <= GPU_MIB  # by its point prediction it would fit
    predictions = CachedPredictions(_predictor())
    assert predictions.slowdowns("rtx-3090", [TENANT, NEWCOMER], GPU_MIB) is None

    assert _beside_the_tenant(NEWCOMER) == []


def test_a_proven_job_packs_to_its_observed_peak_plus_a_margin() -> None:
    proven = dataclasses.replace(NEWCOMER, peak_memory_mib=POINT_MIB)
    predictions = CachedPredictions(_predictor())
    assert predictions.slowdowns("rtx-3090", [TENANT, proven], GPU_MIB) == (1.05, 1.05)

    assert _beside_the_tenant(proven) == ["ns/new"]


def test_alone_on_an_empty_gpu_a_job_keeps_the_whole_gpu() -> None:
    large = JobPrediction(utilization=0.3, memory_mib=20000.0, memory_source=memory_spread.CONFIG)
    assert memory_spread.sharing_memory_mib(large) > GPU_MIB  # its upper bound exceeds the GPU
    predictor = SourcedPredictor({"newcomer": (0.3, 20000.0)}, {})
    policy = make_policy("horus", predictor=predictor)

    (placed,) = policy.schedule(_cluster(), [JobRequest("ns/new", NEWCOMER, max_slowdown=2.0)])
    assert placed.predicted_memory_mib == 20000.0
