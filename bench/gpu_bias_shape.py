"""What shape is a model's error on a GPU it never saw: a scale of the log slowdown, or an offset?
(issue 25, item 3: which GPU-level correction to learn online)

    .venv/bin/python bench/gpu_bias_shape.py [--gpus v100,p100,k80] [--out out/online_learning]

For each Gavel GPU G, the model trained without any measurement on G (bench/online_learning.py's, in
OUT/models/without-G; trained here when absent) predicts every measured pair of G (Gavel's truth with
its jobs' host CPUs). With x = ln(predicted slowdown) and y = ln(measured), both floored at 1, it fits
one GPU-wide correction by least squares and prints the root-mean-square log error left by each: none
(the prior), an offset (y = x + a), a scale through the origin (y = b·x, what `correction.py` learns),
and both (y = a + b·x). Writes OUT/gpu_bias_shape.json; docs/prediction.md quotes it. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import online_learning

from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import TruthTable, gavel_truth
from horus_operator.prediction.predictor import load_predictor


def pairs(truth: TruthTable, models: Path, gpu: str) -> tuple[np.ndarray, np.ndarray]:
    """x and y of every measured (job, co-tenant) on `gpu` the model lets share."""
    predictor = load_predictor(models)
    xs, ys = [], []
    for (a, b), measured in truth.pairs.items():
        if a[0] != gpu or measured is None:
            continue
        together = [Workload(m, batch, host_cpus=truth.host_cpus.get(m, 0.0)) for _, m, batch in (a, b)]
        predicted = predictor.slowdowns(gpu, together)
        if predicted is not None:
            xs.append(math.log(max(1.0, predicted[0])))
            ys.append(math.log(max(1.0, measured[0])))
    return np.array(xs), np.array(ys)


def fits(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    def rms(residual: np.ndarray) -> float:
        return round(float(np.sqrt(np.mean(residual**2))), 4)

    offset = float(np.mean(y - x))
    scale = float(x @ y / (x @ x))
    slope, intercept = np.polyfit(x, y, 1)
    return {
        "samples": len(x),
        "median_predicted": round(math.exp(float(np.median(x))), 3),
        "median_measured": round(math.exp(float(np.median(y))), 3),
        "rms_prior": rms(y - x),
        "offset": round(offset, 4),
        "rms_offset": rms(y - x - offset),
        "scale": round(scale, 4),
        "rms_scale": rms(y - scale * x),
        "both": [round(float(intercept), 4), round(float(slope), 4)],
        "rms_both": rms(y - intercept - slope * x),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="v100,p100,k80")
    parser.add_argument("--out", type=Path, default=online_learning.REPO / "out" / "online_learning")
    args = parser.parse_args()
    truth = gavel_truth()
    results = {}
    for gpu in args.gpus.split(","):
        models = online_learning.train_without(gpu, args.out / "models", reuse=True)
        results[gpu] = fits(*pairs(truth, models, gpu))
        print(gpu, json.dumps(results[gpu]), flush=True)
    (args.out / "gpu_bias_shape.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
