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
    [
        ("data/colocation/gavel_pairs_train.csv", "v100"),
        ("data/memory/milabench_scaling_nvidia.csv", "H100"),
        ("data/memory/migprofiler_a100_80gb_train.csv", "A100-80GB"),
        ("data/memory/miso_a100_40gb_tensorflow.csv", "A100-40GB"),
    ],
)
def test_without_gpu_drops_every_row_of_that_gpu_and_keeps_the_rest(
    path: str, label: str, tmp_path: Path
) -> None:
    script = _script()
    gpu = script.normalize_gpu(label)
    copy = script.without_gpu(REPO / path, gpu, tmp_path)
    with (REPO / path).open(newline="") as handle:
        reader = csv.DictReader(handle)
        original, columns = list(reader), reader.fieldnames
    with copy.open(newline="") as handle:
        reader = csv.DictReader(handle)
        kept, kept_columns = list(reader), reader.fieldnames
    assert not any(script.normalize_gpu(row["gpu"]) == gpu for row in kept)
    assert len(kept) == sum(script.normalize_gpu(row["gpu"]) != gpu for row in original) < len(original)
    assert kept_columns == columns  # the header stays where no row does (a source of one GPU)


def test_excluding_a_gpu_needs_an_output_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["train_models.py", "--exclude-gpu", "v100"])
    with pytest.raises(SystemExit, match="2"):
        _script().main()


def test_the_peaks_without_a_gpu_are_every_other_source_s(tmp_path: Path) -> None:
    """What `--exclude-gpu a100-80gb` hands the memory fit: milabench's and MISO's peaks, MIGProfiler's
    none."""
    from horus_operator.prediction import catalog
    from horus_operator.prediction.training import memory_fit

    script = _script()
    for path in sorted(script.PEAKS_DIR.glob("*.csv")):
        script.without_gpu(path, "a100-80gb", tmp_path).rename(tmp_path / path.name)
    peaks = memory_fit.all_peaks(tmp_path, catalog.lookup)
    assert set(peaks["source"]) == {"milabench", "miso"} and "a100-80gb" not in set(peaks["gpu"])
