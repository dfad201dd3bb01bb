"""Regenerate the models shipped in horus_operator/prediction/models/ from the measurements in data/.

    .venv/bin/python hack/train_models.py [--out DIR] [--exclude-gpu G]

Prints the cross-validated metrics that docs/prediction.md reports; they are also written to
metadata.json beside the models. `--exclude-gpu G --out DIR` trains the same model types without any
measurement taken on GPU G (a GFD product string or short name), so `horus simulate --models DIR`
or `horus run --models DIR` predicts for that GPU as for one never measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
from pathlib import Path

from horus_operator.prediction import artifacts, catalog
from horus_operator.prediction.gpus import normalize_gpu
from horus_operator.prediction.training import common, memory_fit, roofline_fit, slowdown_fit

REPO = Path(__file__).resolve().parent.parent
PAIRS_CSV = REPO / "data" / "colocation" / "gavel_pairs_train.csv"
STEP_TIMES_CSV = REPO / "data" / "colocation" / "gavel_isolated.csv"
TIMM_CSV = REPO / "data" / "throughput" / "timm_train_rtx3090_amp.csv"
TIMM_GPU = "rtx-3090"  # the file has no gpu column: every row is timm's RTX 3090 run
PEAKS_DIR = REPO / "data" / "memory"  # every measured-peak source (memory_fit.all_peaks)
HOST_CPUS_CSV = REPO / "data" / "colocation" / "gavel_host_cpus.csv"


def without_gpu(path: Path, gpu: str, directory: Path) -> Path:
    """A copy of a measurement CSV (with a `gpu` column) in `directory` without `gpu`'s rows (a row
    naming no GPU, as some published peaks do, is not `gpu`'s)."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    fields = list(rows[0]) if rows else []
    kept = [row for row in rows if not row["gpu"] or normalize_gpu(row["gpu"]) != gpu]
    copy = directory / f"{path.stem}-without-{gpu}.csv"
    with copy.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="models directory (default: the shipped one)")
    parser.add_argument("--exclude-gpu", metavar="G", help="train without the measurements taken on GPU G")
    args = parser.parse_args()
    if args.exclude_gpu and args.out is None:
        parser.error("--exclude-gpu needs --out: the shipped models are trained on every GPU")
    out = args.out or artifacts.SHIPPED_DIR
    pairs, step_times, timm, peaks = PAIRS_CSV, STEP_TIMES_CSV, TIMM_CSV, PEAKS_DIR
    with tempfile.TemporaryDirectory(prefix="horus-train-") as scratch:
        if args.exclude_gpu:
            gpu = normalize_gpu(args.exclude_gpu)
            pairs, step_times = (without_gpu(path, gpu, Path(scratch)) for path in (pairs, step_times))
            peaks = Path(scratch) / "memory"
            peaks.mkdir()
            for path in sorted(PEAKS_DIR.glob("*.csv")):
                without_gpu(path, gpu, peaks).rename(peaks / path.name)
            timm = None if gpu == TIMM_GPU else timm
        # Step times first: the slowdown prior reads its step times from the freshly calibrated constants.
        metrics = roofline_fit.train_step_times(step_times, out, catalog.lookup, timm=timm)
        metrics |= slowdown_fit.train_slowdown(
            pairs, out, catalog.lookup, cpus=common.host_cpus(HOST_CPUS_CSV)
        )
        # After train_slowdown: this envelope over measured peaks replaces its feasibility-fitted memory.json.
        metrics |= memory_fit.train_memory(peaks, pairs, out, catalog.lookup)
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
