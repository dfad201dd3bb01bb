"""`horus simulate`: the output files and summary keys other tools depend on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_builders import HEADER, ROWS, predictor

from horus_operator.commands import simulate as command
from horus_operator.sim.metrics import SUMMARY_KEYS


def test_writes_summary_csvs_plots_and_prints_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "_predictor", lambda models: predictor())
    truth = tmp_path / "truth.csv"
    truth.write_text(HEADER + ROWS)
    output = tmp_path / "out"
    args = ["--workload", "synthetic", "--jobs", "30", "--gpus", "4", "--truth", str(truth)]
    result = CliRunner().invoke(command.simulate, [*args, "--output", str(output)])
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
