"""hack/train_models.py --exclude-gpu: the training inputs it hands over never hold the excluded GPU."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("train_models", REPO / "hack" / "train_models.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("path", "label"),
    [("data/colocation/gavel_pairs_train.csv", "v100"), ("data/memory/milabench_scaling_nvidia.csv", "H100")],
)
def test_without_gpu_drops_every_row_of_that_gpu_and_keeps_the_rest(
    path: str, label: str, tmp_path: Path
) -> None:
    script = _script()
    gpu = script.normalize_gpu(label)
    copy = script.without_gpu(REPO / path, gpu, tmp_path)
    with (REPO / path).open(newline="") as handle:
        original = list(csv.DictReader(handle))
    with copy.open(newline="") as handle:
        kept = list(csv.DictReader(handle))
    assert not any(script.normalize_gpu(row["gpu"]) == gpu for row in kept)
    assert len(kept) == sum(script.normalize_gpu(row["gpu"]) != gpu for row in original) < len(original)
    assert kept[0].keys() == original[0].keys()


def test_excluding_a_gpu_needs_an_output_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["train_models.py", "--exclude-gpu", "v100"])
    with pytest.raises(SystemExit, match="2"):
        _script().main()
