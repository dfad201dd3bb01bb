"""Trace loaders: formats recognised, assumptions applied (units, clipping, skipped pods)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.traces import GPUS_PER_NODE, load_trace

REPO = Path(__file__).resolve().parents[3]
TRUTH = REPO / "data" / "colocation" / "gavel_pairs_train.csv"


def test_gavel_trace_maps_job_types_to_catalog_names() -> None:
    scenario = load_trace(
        REPO / "data" / "traces" / "gavel_small_test.trace", TruthTable.from_csv(TRUTH), random.Random(1), 8
    )
    assert len(scenario.jobs) == 20
    assert {job.request.workload.model for job in scenario.jobs} <= {
        "resnet18", "resnet50", "transformer", "lstm-lm", "recommendation", "a3c", "cyclegan",
    }  # fmt: skip
    assert scenario.gpu_count == 8


def test_muri_times_are_milliseconds_and_wide_jobs_are_clipped_to_a_node(tmp_path: Path) -> None:
    trace = tmp_path / "muri.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,"
        "resource_time_0,resource_time_1,resource_time_2,priority\n"
        "0,16,5000,10,gpt2,4,20000,0,2000,0,0,0,0\n"
        "1,1,1000,10,bert,8,3000,0,300,0,0,0,0\n"
    )
    scenario = load_trace(trace, TruthTable.from_csv(TRUTH), random.Random(1), None)
    first, wide = scenario.jobs
    assert first.arrival_s == 0 and wide.arrival_s == pytest.approx(4.0)  # shifted to the first arrival
    assert first.isolated_duration_s == pytest.approx(3.0)
    assert wide.request.gpus == GPUS_PER_NODE
    assert wide.isolated_duration_s == pytest.approx(20.0 * 16 / GPUS_PER_NODE)  # GPU-time kept


def test_trace_priorities_reach_the_requests(tmp_path: Path) -> None:
    trace = tmp_path / "muri.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,"
        "resource_time_0,resource_time_1,resource_time_2,priority\n"
        "0,1,0,10,bert,8,3000,0,300,0,0,0,1\n"
        "1,1,1000,10,bert,8,3000,0,300,0,0,0,0\n"
    )
    muri = load_trace(trace, TruthTable.from_csv(TRUTH), random.Random(1), None)
    assert [job.request.priority for job in muri.jobs] == [1, 0]
    assert muri.gpu_count == 64  # the trace's GPU counts are the jobs', not the cluster's
    gavel = load_trace(
        REPO / "data" / "traces" / "gavel_small_test.trace", TruthTable.from_csv(TRUTH), random.Random(1), 8
    )
    assert {job.request.priority for job in gavel.jobs} == {1}  # priority_weight 1 throughout


def test_alibaba_pods_without_gpus_are_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "openb.csv"
    trace.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "p0,1000,1024,0,0,,LS,Running,0,100,0\n"
        "p1,1000,1024,1,500,,LS,Running,10,70,10\n"
        "p2,1000,1024,2,1000,,LS,Running,20,50,20\n"
    )
    scenario = load_trace(trace, TruthTable.from_csv(TRUTH), random.Random(1), None)
    assert [(j.request.key, j.request.gpus, j.isolated_duration_s) for j in scenario.jobs] == [
        ("p1", 1, 60.0),
        ("p2", 2, 30.0),
    ]


def test_an_unknown_format_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "x.csv"
    trace.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a Gavel"):
        load_trace(trace, TruthTable.from_csv(TRUTH), random.Random(1), None)
