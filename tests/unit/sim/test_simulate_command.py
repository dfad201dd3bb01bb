"""`horus simulate`: the output files and summary keys other tools depend on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sim_builders import HEADER, ROWS, predictor

from horus_operator.commands import simulate as command
from horus_operator.sim.metrics import SUMMARY_KEYS


def simulate_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str, jobs: int
) -> tuple[Result, Path]:
    """`horus simulate` on a synthetic trace over the test truth table, deciding with `predictor()`."""
    monkeypatch.setattr(command, "_predictor", lambda models: predictor())
    truth = tmp_path / "truth.csv"
    truth.write_text(HEADER + ROWS)
    output = tmp_path / "out"
    args = ["--workload", "synthetic", "--jobs", str(jobs), "--gpus", "4", "--truth", str(truth), *flags]
    return CliRunner().invoke(command.simulate, [*args, "--output", str(output)]), output


def test_writes_summary_csvs_plots_and_prints_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, output = simulate_synthetic(tmp_path, monkeypatch, jobs=30)
    assert result.exit_code == 0, result.output
    summary = json.loads((output / "summary.json").read_text())
    assert list(summary) == ["horus", "exclusive", "binpack"]
    for values in summary.values():
        assert tuple(values) == SUMMARY_KEYS
        assert values["jobs"] == 30
    for name in ("jobs_horus.csv", "jobs_exclusive.csv", "jobs_binpack.csv", "jct_cdf.png", "makespan.png"):
        assert (output / name).is_file()
    assert "horus vs exclusive: makespan" in result.output


def test_unknown_policy_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        command.simulate, ["--workload", "synthetic", "--policy", "fastest", "--output", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert "unknown policy" in result.output


def test_online_learning_reports_what_each_policy_learned_and_the_run_by_quarter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, output = simulate_synthetic(
        tmp_path, monkeypatch, "--online-learning", "--policy", "horus", jobs=40
    )

    assert result.exit_code == 0, result.output
    details = json.loads((output / "details.json").read_text())
    assert details["scenario"]["online_learning"] is True
    assert set(details["horus"]["online_learning"]) == {
        "samples_learned",
        "samples_refused",
        "correction_entries",
    }
    assert sum(q["jobs"] for q in details["horus"]["quarters"]) == 40


def test_migration_with_online_learning_reports_the_moves_in_the_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, output = simulate_synthetic(
        tmp_path,
        monkeypatch,
        "--online-learning",
        "--migration",
        "--restart-cost-seconds",
        "60",
        "--policy",
        "horus",
        jobs=40,
    )

    assert result.exit_code == 0, result.output
    details = json.loads((output / "details.json").read_text())
    assert details["scenario"]["migration"] is True
    migration = details["horus"]["migration"]
    assert (migration["restart_cost_s"], migration["grace_period_s"]) == (60.0, 30.0)
    assert migration["moves"] == sum(migration["by_trigger"].values())
    assert "over_limit_job_hours" in details["horus"]


def test_time_sliced_decisions_are_recorded_and_go_over_the_limit_no_more_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Time-slicing only lifts predicted slowdowns (prediction/timeslicing.py): horus goes over no more
    often than without it, and the run says which it was."""
    runs = {name: tmp_path / name for name in ("plain", "sliced")}
    for folder in runs.values():
        folder.mkdir()
    plain, plain_out = simulate_synthetic(runs["plain"], monkeypatch, "--policy", "horus", jobs=40)
    sliced, sliced_out = simulate_synthetic(
        runs["sliced"], monkeypatch, "--policy", "horus", "--time-sliced", jobs=40
    )

    assert plain.exit_code == 0 and sliced.exit_code == 0, sliced.output
    assert json.loads((sliced_out / "details.json").read_text())["scenario"]["time_sliced"] is True
    assert "time_sliced" not in json.loads((plain_out / "details.json").read_text())["scenario"]
    summaries = [json.loads((out / "summary.json").read_text())["horus"] for out in (plain_out, sliced_out)]
    assert summaries[1]["qos_violations"] <= summaries[0]["qos_violations"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--online-learning", "--decide-with", "truth"], "--online-learning"),
        (["--gpu", "h100"], "--gpu"),
    ],
)
def test_contradictory_or_unmeasured_choices_are_refused(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    truth = tmp_path / "truth.csv"
    truth.write_text(HEADER + ROWS)
    args = ["--workload", "synthetic", "--jobs", "4", "--gpus", "1", "--truth", str(truth), *extra]

    result = CliRunner().invoke(command.simulate, [*args, "--output", str(tmp_path / "out")])

    assert result.exit_code == 2 and message in result.output


@pytest.mark.parametrize("order", ["shortest-remaining", "las"])
def test_the_queue_order_and_durations_reach_the_run_and_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    result, output = simulate_synthetic(
        tmp_path, monkeypatch, "--policy", "horus", "--queue-order", order, "--durations", "truth", jobs=30
    )
    assert result.exit_code == 0, result.output
    scenario = json.loads((output / "details.json").read_text())["scenario"]
    assert (scenario["queue_order"], scenario["durations"]) == (order, "truth")
    # The multiple is the order's default: ten times the job's length where the order reads lengths.
    multiple = 10.0 if order == "shortest-remaining" else None
    assert scenario["max_wait_s"] == 86400.0 and scenario["starvation_multiple"] == multiple


def test_a_plain_csv_trace_runs_on_an_rtx_3090(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command, "_predictor", lambda models: predictor())
    truth, trace, output = tmp_path / "truth.csv", tmp_path / "lucid.csv", tmp_path / "out"
    truth.write_text(HEADER + ROWS)
    trace.write_text("job_id,submit_s,gpus,duration_s,model,batch_size\nx,0,1,60,a,1\ny,10,1,30,b,1\n")
    args = ["--workload", str(trace), "--gpu", "rtx-3090", "--gpus", "8", "--truth", str(truth)]
    result = CliRunner().invoke(command.simulate, [*args, "--policy", "horus", "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert "lucid: 2 jobs on 8 GPUs" in result.output


def test_a_bad_trace_is_a_usage_error_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "_predictor", lambda models: predictor())
    truth, trace = tmp_path / "truth.csv", tmp_path / "bad.csv"
    truth.write_text(HEADER + ROWS)
    trace.write_text("job_id,submit_s,gpus,duration_s,model,batch_size\nx,0,two,60,a,1\n")
    args = ["--workload", str(trace), "--truth", str(truth), "--output", str(tmp_path / "out")]
    result = CliRunner().invoke(command.simulate, args)
    assert result.exit_code != 0
    assert "line 2, column gpus" in result.output
