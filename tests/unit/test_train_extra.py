"""Training's libraries are an optional extra: without them `horus train` says which one and how to get
it, and nothing else needs them. Nor does anything but reading an ONNX graph need `onnx`, which would
cost every start of the operator, the agent and the simulator about a second."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from horus_operator import prediction
from horus_operator.commands.predict import train


def test_train_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # as if never imported in this process (other tests train)
    for name in [name for name in sys.modules if name.startswith("horus_operator.prediction.training")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(prediction, "training", raising=False)
    monkeypatch.setitem(sys.modules, "xgboost", None)  # as if not installed
    data = tmp_path / "pairs.csv"
    data.write_text("gpu\n")
    result = CliRunner().invoke(train, ["slowdown", "--data", str(data), "--out", str(tmp_path / "m")])
    assert result.exit_code == 1
    assert "needs the 'train' extra (xgboost is not installed)" in result.output
    assert "pip install 'horus-operator[train]'" in result.output


def test_the_operator_agent_and_simulator_load_without_pandas_xgboost_or_onnx() -> None:
    code = (
        "import sys\n"
        "sys.modules.update(pandas=None, xgboost=None, scipy=None, onnx=None)\n"
        "import horus_operator.commands.run, horus_operator.operator.entry\n"
        "import horus_operator.operator.runtime, horus_operator.operator.handlers\n"
        "import horus_operator.commands.agent, horus_operator.commands.simulate\n"
        "from horus_operator.prediction.predictor import load_predictor\n"
        "from horus_operator.prediction.api import Workload\n"
        "print(load_predictor().job(Workload('resnet50', 32), 'v100').memory_mib > 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
