"""How the slowdown model predicts the pairs measured on an H200, a GPU generation it never saw (issue 25).

    .venv/bin/python bench/h200_pairs.py [--models DIR] [--out out/h200_pairs.json]

Truth: data/colocation/h200_pairs.csv (two runs of 45 pairs with a loop that never waits for the GPU,
one of 6 pairs whose loop reads its loss each step; data/README.md). Each job's slowdown in each pair is
predicted by the predictor in DIR (default: the shipped models, trained on Gavel's K80/P100/V100 pairs
only) in two ways:
- from predictions: the job's busy fraction from its graph (the roofline), as for a job never seen;
- with the observed busy fraction: `Workload.busy` set to the utilization the H200 measured for the
  job alone, as the operator does once the agent has seen a job of that kind alone (correction.py);
by the slowdown prior alone on each, and by the model for time-sliced co-tenants (`within_fair_shares`:
each job at least its busy fraction over its fair share of the GPU's time, and one whose measured busy
fraction fits its share at most the prior's answer; the H200 ran without MPS),
beside the constant that predicts the training rows' median slowdown. Scores: mean |log(predicted /
measured)| and Spearman's rank correlation over every job of every pair, per loop; and for the pairs of a
saturating job (alone ≥ 90 % busy) with a launch-bound one (≤ 60 %), each side's mean predicted and
measured slowdown. Asserts nothing; docs/evaluation.md quotes the table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from horus_operator.prediction import artifacts
from horus_operator.prediction.api import Workload
from horus_operator.prediction.predictor import XGBoostPredictor
from horus_operator.prediction.timeslicing import within_fair_shares
from horus_operator.prediction.training import common

REPO = Path(__file__).resolve().parent.parent
PAIRS_CSV = REPO / "data" / "colocation" / "h200_pairs.csv"
ISOLATED_CSV = REPO / "data" / "colocation" / "h200_isolated.csv"
TRAINING_PAIRS_CSV = REPO / "data" / "colocation" / "gavel_pairs_train.csv"
GPU = "h200"
SATURATING, LAUNCH_BOUND = 0.9, 0.6


def measured(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per job of each measured pair: own and co-runner configuration, measured slowdown."""
    sides = []
    for own, other in (("a", "b"), ("b", "a")):
        side = pairs.rename(
            columns={
                f"model_{own}": "model",
                f"batch_{own}": "batch",
                f"model_{other}": "other_model",
                f"batch_{other}": "other_batch",
            }
        )
        side["slowdown"] = pairs[f"tput_{own}_alone"] / pairs[f"tput_{own}_shared"]
        side["pair"] = pairs.index
        sides.append(
            side[["run", "loop", "pair", "model", "batch", "other_model", "other_batch", "slowdown"]]
        )
    return pd.concat(sides, ignore_index=True)


def predicted(
    jobs: pd.DataFrame, predictor: XGBoostPredictor, busy: dict[tuple[str, int], float] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the model's, the prior's, the model's for time-sliced co-tenants) slowdown of each job; `busy`:
    observed busy fractions, or None."""

    def workload(model: str, batch: int) -> Workload:
        return Workload(model, int(batch), busy=None if busy is None else busy[(model, int(batch))])

    queries = [
        (GPU, workload(r.model, r.batch), workload(r.other_model, r.other_batch)) for r in jobs.itertuples()
    ]
    answers = predictor.pairs(queries)
    law = predictor.models.slowdown_prior

    def demand(
        job: Workload,
    ) -> tuple[float, float]:  # the busy fraction the prior reads: observed, else predicted
        return predictor.job(job, GPU).utilization, job.host_cpus

    demands = [law.inputs(demand(a), demand(b)) for _, a, b in queries]
    prior = np.exp(law.log_slowdown(np.array(demands)))
    sliced = [
        within_fair_shares(predictor, GPU, (a, b), (answer.slowdown_a, answer.slowdown_b))[0]
        for (_, a, b), answer in zip(queries, answers, strict=True)
    ]
    return np.array([answer.slowdown_a for answer in answers]), prior, np.array(sliced)


def scores(truth: np.ndarray, guess: np.ndarray) -> dict[str, float]:
    error = np.abs(np.log(guess) - np.log(truth))
    rank = spearmanr(guess, truth).statistic if np.ptp(guess) > 0 else float("nan")
    return {
        "mean_abs_log_error": float(error.mean()),
        "spearman": float(rank),
        "mean_ratio": float(np.exp(np.mean(np.log(guess / truth)))),
    }


def asymmetry(jobs: pd.DataFrame, guess: np.ndarray, busy: dict[tuple[str, int], float]) -> dict[str, float]:
    """Mean measured and predicted slowdown of each side of the saturating + launch-bound pairs."""
    own = np.array([busy[(m, int(b))] for m, b in zip(jobs.model, jobs.batch, strict=True)])
    other = np.array([busy[(m, int(b))] for m, b in zip(jobs.other_model, jobs.other_batch, strict=True)])
    heavy = (own >= SATURATING) & (other <= LAUNCH_BOUND)
    light = (own <= LAUNCH_BOUND) & (other >= SATURATING)
    truth = jobs["slowdown"].to_numpy()
    return {
        "saturating_measured": float(truth[heavy].mean()),
        "saturating_predicted": float(guess[heavy].mean()),
        "launch_bound_measured": float(truth[light].mean()),
        "launch_bound_predicted": float(guess[light].mean()),
        "jobs_per_side": int(heavy.sum()),
    }


def run(models: Path | None) -> dict[str, Any]:
    predictor = XGBoostPredictor(artifacts.load(models))
    jobs = measured(pd.read_csv(PAIRS_CSV))
    alone = pd.read_csv(ISOLATED_CSV).groupby(["model", "batch"])["gpu_util"].mean()
    busy = {(model, int(batch)): float(value) for (model, batch), value in alone.items()}
    training = common.slowdown_samples(TRAINING_PAIRS_CSV)
    constant = float(np.median(training.loc[training["feasible"], "slowdown"]))
    guesses = {"constant (training median)": np.full(len(jobs), constant)}
    for label, observed in (("from predictions", None), ("with the observed busy fraction", busy)):
        model, prior, sliced = predicted(jobs, predictor, observed)
        guesses[f"model, {label}"] = model
        guesses[f"prior alone, {label}"] = prior
        guesses[f"model time-sliced, {label}"] = sliced
    result: dict[str, Any] = {"constant": constant, "jobs": len(jobs), "by_loop": {}, "asymmetry": {}}
    for loop, rows in jobs.groupby("loop"):
        index = rows.index.to_numpy()
        truth = rows["slowdown"].to_numpy()
        result["by_loop"][loop] = {name: scores(truth, guess[index]) for name, guess in guesses.items()}
        result["asymmetry"][loop] = {
            name: asymmetry(rows, guess[index], busy)
            for name, guess in guesses.items()
            if "constant" not in name
        }
    return result


def table(result: dict[str, Any]) -> str:
    lines = [
        "| loop | predictor | mean abs log error | Spearman | predicted / measured (geo. mean) |",
        "|---|---|---|---|---|",
    ]
    for loop, rows in result["by_loop"].items():
        for name, score in rows.items():
            lines.append(
                f"| {loop} | {name} | {score['mean_abs_log_error']:.3f} | {score['spearman']:+.2f} "
                f"| {score['mean_ratio']:.2f} |"
            )
    lines += [
        "",
        "| loop | predictor | saturating side: measured / predicted "
        "| launch-bound side: measured / predicted |",
        "|---|---|---|---|",
    ]
    for loop, rows in result["asymmetry"].items():
        for name, sides in rows.items():
            lines.append(
                f"| {loop} | {name} "
                f"| {sides['saturating_measured']:.2f} / {sides['saturating_predicted']:.2f} "
                f"| {sides['launch_bound_measured']:.2f} / {sides['launch_bound_predicted']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", type=Path, default=None, help="models directory (default: the shipped one)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "out" / "h200_pairs.json")
    args = parser.parse_args()
    result = run(args.models)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
