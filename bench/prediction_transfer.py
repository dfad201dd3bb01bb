"""How the predictions transfer to GPUs and architectures the models never saw, beside a constant.

    .venv/bin/python bench/prediction_transfer.py [--out out/prediction_transfer.json]

Every number comes from one run on the shipped data, each model refitted without the held-out group:
- slowdown (Gavel pairs): leave one GPU type out (train on two, test the third) and leave one
  architecture family out (every pair touching it), for the graph-feature model alone and with the
  neighbour columns of the training rows (the shipped model), each a bounded residual on the physical
  prior fitted on the training rows, whose busy fractions come from roofline constants calibrated
  without the held-out group's step times, and the prior alone; MAPE and Spearman's rank correlation
  (pooled over the held-out groups, and within each group) against predicting the training rows'
  median slowdown, and within each group the predictions' interquartile range over the measured one;
- utilization: the roofline step time, calibrated without the held-out GPU or family (mean |log
  error| of the step time, against the training median step time);
- memory: Gavel's feasibility (pairs that ran fit, pairs reported at zero throughput did not) and
  every measured peak under `data/memory/` when present: share of jobs predicted more than 10 %
  under their measured peak, and the median predicted / measured.
It asserts nothing; docs/prediction.md ("Transfer") quotes its table.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from horus_operator.prediction import artifacts, catalog, memory, slowdown, validation
from horus_operator.prediction.training import common, memory_fit, roofline_fit, slowdown_fit
from horus_operator.prediction.training.families import family as family_of

REPO = Path(__file__).resolve().parent.parent
PAIRS_CSV = REPO / "data" / "colocation" / "gavel_pairs_train.csv"
STEP_TIMES_CSV = REPO / "data" / "colocation" / "gavel_isolated.csv"
TIMM_CSV = REPO / "data" / "throughput" / "timm_train_rtx3090_amp.csv"
HOST_CPUS_CSV = REPO / "data" / "colocation" / "gavel_host_cpus.csv"


def spearman(actual: np.ndarray, predicted: np.ndarray) -> float:
    return float(pd.Series(actual).corr(pd.Series(predicted), method="spearman"))


def iqr(values: np.ndarray) -> float:
    high, low = np.quantile(values, [0.75, 0.25])
    return float(high - low)


def fold_priors(
    samples: pd.DataFrame,
    step_times: roofline_fit.JobSamples,
    step_time_groups: np.ndarray,
    groups: Sequence[str],
) -> dict[str, np.ndarray]:
    """For each held-out group, every sample's prior inputs from roofline constants calibrated without
    that group's step times (`step_time_groups`: each measured step time's GPU type or family), so no
    fold's prior has seen the held-out GPU or architecture."""
    return {
        group: slowdown_fit.prior_inputs(
            samples,
            catalog.lookup,
            roofline_fit.calibrate_step_times(step_times, np.flatnonzero(step_time_groups != group)),
            common.host_cpus(HOST_CPUS_CSV),
        )
        for group in groups
    }


def slowdown_transfer(
    samples: pd.DataFrame,
    matrix: np.ndarray,
    priors: dict[str, np.ndarray],
    held_out: Callable[[str], np.ndarray],
    groups: Sequence[str],
) -> dict[str, Any]:
    """For each model variant: MAPE, Spearman and the median baseline pooled over the held-out groups,
    and Spearman within each group. `priors`: each group's prior inputs (`fold_priors`)."""
    measured = (samples["feasible"] & ~samples["placeholder"]).to_numpy()
    feasible = samples["feasible"].to_numpy()
    target = samples["slowdown"].to_numpy()
    queries = slowdown_fit.neighbour_queries(samples)
    variants = ("features", "neighbours", "prior", "median")
    pooled: dict[str, list[np.ndarray]] = {"actual": [], **{variant: [] for variant in variants}}
    for group in groups:
        test_mask = held_out(group)
        train = np.flatnonzero(~test_mask & feasible)
        test = np.flatnonzero(test_mask & measured)
        alone = slowdown_fit.fit_fold(matrix, queries, target, priors[group], train, use_neighbours=False)
        pooled["features"].append(alone.predict(matrix, queries, priors[group], test))
        pooled["prior"].append(slowdown.from_raw(alone.law.log_slowdown(priors[group][test])))
        shipped = slowdown_fit.fit_fold(matrix, queries, target, priors[group], train)
        pooled["neighbours"].append(shipped.predict(matrix, queries, priors[group], test))
        pooled["median"].append(np.full(len(test), np.median(target[train])))
        pooled["actual"].append(target[test])
    actual = np.concatenate(pooled["actual"])
    result: dict[str, Any] = {}
    for variant in variants:
        predicted = np.concatenate(pooled[variant])
        result[variant] = {
            "mape": round(validation.mape(actual, predicted), 4),
            "spearman": round(spearman(actual, predicted), 3) if variant != "median" else 0.0,
            "spearman_within": {
                group: round(spearman(truth, guess), 3)
                for group, truth, guess in zip(groups, pooled["actual"], pooled[variant], strict=True)
            }
            if variant != "median"
            else {},
            # The issue's spread check: the predictions' interquartile range over the measured one.
            "iqr_ratio_within": {
                group: round(iqr(guess) / iqr(truth), 3)
                for group, truth, guess in zip(groups, pooled["actual"], pooled[variant], strict=True)
            },
        }
    result["samples"] = {"n": len(actual)}
    return result


def memory_check(samples: pd.DataFrame) -> dict[str, float]:
    """Balanced accuracy of the shipped memory rule on Gavel's pair feasibility (no refit)."""
    data = memory_fit.memory_feasibility_data(samples, catalog.lookup)
    model = artifacts.load().memory
    predicted = memory.predicted_feasible(model, data)
    singles = data.jobs == 1
    return {
        "singles_predicted_to_fit": round(float(predicted[singles].mean()), 4),
        "pairs_balanced_accuracy": round(
            memory.balanced_accuracy(predicted[~singles], data.feasible[~singles]), 4
        ),
    }


def step_time_transfer(models_dir: Path) -> dict[str, object]:
    """The roofline calibration's held-out-GPU and held-out-family step-time errors (written to a
    scratch models directory, never over the shipped one)."""
    return roofline_fit.train_step_times(STEP_TIMES_CSV, models_dir, catalog.lookup, timm=TIMM_CSV)[
        "utilization"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "prediction_transfer.json")
    out = parser.parse_args().out
    samples = common.slowdown_samples(PAIRS_CSV)
    matrix = slowdown_fit.slowdown_matrix(samples, catalog.lookup)
    family = {side: samples[f"{side}_model"].map(family_of).to_numpy() for side in ("own", "other")}
    gpus = sorted(set(samples["gpu"]))
    families = sorted(set(family["own"]))
    step_times = roofline_fit.step_time_samples(STEP_TIMES_CSV, catalog.lookup, timm=TIMM_CSV)
    step_time_families = np.array([family_of(model) for model in step_times.models])
    report = {
        "slowdown_leave_one_gpu_out": slowdown_transfer(
            samples,
            matrix,
            fold_priors(samples, step_times, step_times.gpus, gpus),
            lambda gpu: (samples["gpu"] == gpu).to_numpy(),
            gpus,
        ),
        "slowdown_leave_one_family_out": slowdown_transfer(
            samples,
            matrix,
            fold_priors(samples, step_times, step_time_families, families),
            lambda name: (family["own"] == name) | (family["other"] == name),
            families,
        ),
        "step_time": step_time_transfer(out.parent / "transfer-models"),
        "memory": memory_check(samples),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print("slowdown            split   variant     MAPE  Spearman")
    for split in ("slowdown_leave_one_gpu_out", "slowdown_leave_one_family_out"):
        for variant in ("features", "neighbours", "prior", "median"):
            scores = report[split][variant]
            within = " ".join(f"{group} {value:+.2f}" for group, value in scores["spearman_within"].items())
            spread = " ".join(f"{group} {value:.2f}" for group, value in scores["iqr_ratio_within"].items())
            print(
                f"  {split[18:]:22} {variant:10} {scores['mape']:.3f}  {scores['spearman']:+.2f}  {within}"
                f"  | IQR predicted/measured {spread}"
            )
    for split in ("leave_one_gpu_out", "leave_one_family_out"):
        for group, scores in report["step_time"][split].items():
            print(
                f"step time  {split:22} {group:15} |log error| {scores['log_error']:.2f}"
                f"  median baseline {scores['baseline_log_error']:.2f}  ({scores['samples']} jobs)"
            )
    print(f"memory {report['memory']}")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
