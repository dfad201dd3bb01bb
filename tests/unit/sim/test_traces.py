"""Trace loaders: formats recognised, assumptions applied (units, clipping, skipped pods)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.traces import GPUS_PER_NODE, load_trace
from horus_operator.sim.workloads import Scenario

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
    # the iterations, for the operator's estimate, scaled as the time is
    assert (first.trace_steps, wide.trace_steps) == (10.0, 10.0 * 16 / GPUS_PER_NODE)


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


PLAIN = "job_id,submit_s,gpus,duration_s,model,batch_size,max_slowdown,priority\n"


def load_plain(tmp_path: Path, text: str, gpu: str = "v100") -> Scenario:
    trace = tmp_path / "plain.csv"
    trace.write_text(text)
    return load_trace(trace, TruthTable.from_csv(TRUTH), random.Random(1), 16, gpu)


def test_a_plain_csv_gives_each_job_its_own_length_slowdown_and_priority(tmp_path: Path) -> None:
    scenario = load_plain(
        tmp_path,
        PLAIN + "b,130,2,600,resnet50,64,1.5,1\na,100,1,3600,resnet18,32,,\nwide,100,16,10,vgg16,8,,\n",
    )
    jobs = {job.request.key: job for job in scenario.jobs}
    assert [job.request.key for job in scenario.jobs] == ["a", "wide", "b"]  # by arrival
    assert jobs["b"].request.submitted_at == 30.0  # times from the first arrival
    assert jobs["b"].request.max_slowdown == 1.5 and jobs["b"].request.priority == 1
    assert jobs["b"].isolated_duration_s == 600.0 and jobs["b"].request.gpus == 2
    assert jobs["a"].request.priority == 0 and jobs["a"].request.max_slowdown >= 1.0
    assert jobs["wide"].request.gpus == GPUS_PER_NODE and jobs["wide"].isolated_duration_s == 20.0


def test_the_optional_columns_may_be_left_out(tmp_path: Path) -> None:
    scenario = load_plain(tmp_path, "job_id,submit_s,gpus,duration_s,model,batch_size\nx,0,1,60,dqn,128\n")
    assert scenario.jobs[0].request.workload.model == "dqn"
    assert scenario.jobs[0].request.priority == 0


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("job_id,submit_s,gpus,model,batch_size\n", "header lacks column\\(s\\) duration_s"),
        (
            PLAIN + "a,0,1,60,resnet18,32,,\nb,0,one,60,resnet18,32,,\n",
            "line 3, column gpus: 'one' is not an integer",
        ),
        (
            PLAIN + "a,0,1,-5,resnet18,32,,\n",
            "line 2, column duration_s: '-5' is not a finite number of at least 0",
        ),
        (PLAIN + "a,0,1,60,,32,,\n", "line 2, column model: is empty"),
        (PLAIN + "a,0,1,60,resnet18,32,0.5,\n", "column max_slowdown: '0.5'"),
        (PLAIN + "a,x,1,60,resnet18,32,,\n", "column submit_s: 'x' is not a number"),
        (PLAIN + "a,0,1,nan,resnet18,32,,\n", "column duration_s: 'nan'"),
    ],
)
def test_a_bad_plain_csv_names_the_line_and_column(tmp_path: Path, rows: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_plain(tmp_path, rows)


def test_every_trace_format_runs_on_the_gpu_asked_for(tmp_path: Path) -> None:
    plain = load_plain(tmp_path, PLAIN + "a,0,1,60,resnet18,32,,\n", gpu="rtx-3090")
    gavel = load_trace(
        REPO / "data" / "traces" / "gavel_small_test.trace",
        TruthTable.from_csv(TRUTH),
        random.Random(1),
        8,
        "p100",
    )
    muri = load_trace(
        REPO / "data" / "traces" / "muri_cluster_trace.csv",
        TruthTable.from_csv(TRUTH),
        random.Random(1),
        8,
        "a100-80gb",
    )
    for scenario, gpu in ((plain, "rtx-3090"), (gavel, "p100"), (muri, "a100-80gb")):
        assert scenario.gpu == gpu
        assert {g.product for node in scenario.nodes for g in node.gpus} == {gpu}
        assert f"homogeneous {gpu.upper()} cluster" in scenario.notes[0]


def test_a_traces_jobs_of_one_configuration_share_one_workload_object(tmp_path: Path) -> None:
    rows = "a,0,1,60,resnet18,32,,\nb,5,1,60,resnet18,32,,\nc,9,1,60,vgg16,8,,\n"
    scenario = load_plain(tmp_path, PLAIN + rows)
    a, b, c = (job.request.workload for job in scenario.jobs)
    assert a is b and a is not c
