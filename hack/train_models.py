"""Regenerate the models shipped in horus_operator/prediction/models/ from the measurements in data/.

    .venv/bin/python hack/train_models.py [--out DIR]

Prints the cross-validated metrics that docs/prediction.md reports; they are also written to
metadata.json beside the models.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from horus_operator.prediction import artifacts, catalog, training

REPO = Path(__file__).resolve().parent.parent
PAIRS_CSV = REPO / "data" / "colocation" / "gavel_pairs_train.csv"
STEP_TIMES_CSV = REPO / "data" / "colocation" / "gavel_isolated.csv"
TIMM_CSV = REPO / "data" / "throughput" / "timm_train_rtx3090_amp.csv"
PEAKS_CSV = REPO / "data" / "memory" / "milabench_scaling_nvidia.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=artifacts.SHIPPED_DIR)
    out = parser.parse_args().out
    # Step times first: the slowdown prior reads its step times from the freshly calibrated constants.
    metrics = training.train_step_times(STEP_TIMES_CSV, out, catalog.lookup, timm=TIMM_CSV)
    metrics |= training.train_slowdown(PAIRS_CSV, out, catalog.lookup)
    # After train_slowdown, whose feasibility-fitted memory.json this envelope over measured peaks replaces.
    metrics |= training.train_memory(PEAKS_CSV, PAIRS_CSV, out, catalog.lookup)
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
