"""Horus against binpack on an H200, a GPU generation its models never saw, judged by measured pairs.

    .venv/bin/python bench/h200_sim.py [--jobs 600] [--gpus 16] [--seed 1] [--models DIR]
                                       [--time-sliced] [--out out/h200_sim]

The issue-25 experiment on a real unseen GPU rather than a held-out Gavel one. Truth is what the H200
measured (data/colocation/h200_pairs.csv, the two runs whose loop never waits for the GPU, each pair's
slowdowns averaged over them, with each job's busy fraction alone: what the agent observes of it).
Workload: `--jobs` single-GPU jobs drawn uniformly from the ten measured configurations, Poisson
arrivals (mean gap `--gap` seconds) and log-normal lengths alone (median 2 h), written as a plain CSV
(OUT/workload.csv) with no max_slowdown column, so each job's tolerance comes from horus-2500's mix.
Two jobs of the same configuration were never measured together: such a pair's slowdown is the
shipped models' answer, for every policy alike (`truth_coverage` in each summary says how much of the
co-located time that was). Runs `horus simulate` for horus from predictions, horus with the online
correction (it learns each job's busy fraction and its slowdowns as the operator's telemetry would),
with it and moves (`--migration`), horus deciding from truth (the oracle), binpack and exclusive;
prints makespan, mean JCT and QoS violations as ratios to binpack from the same run, and the share of
jobs over their maxSlowdown. `--time-sliced`: horus's rows predict as for time-sliced GPUs, which
the H200 was (`horus simulate --time-sliced`). Asserts nothing; docs/evaluation.md quotes it.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
HORUS = Path(sys.executable).with_name("horus")  # the venv running this bench
SHIPPED_MODELS = REPO / "horus_operator" / "prediction" / "models"
PAIRS_CSV = REPO / "data" / "colocation" / "h200_pairs.csv"
ISOLATED_CSV = REPO / "data" / "colocation" / "h200_isolated.csv"
LOOP = "no host sync"
TRUTH_COLUMNS = ("gpu", "model_a", "batch_a", "model_b", "batch_b", "tput_a_alone", "tput_b_alone")
TRUTH_COLUMNS += ("tput_a_shared", "tput_b_shared", "util_a_alone", "util_b_alone")
MODES = {  # row -> horus simulate flags
    "horus, predictions": ["--policy", "horus"],
    "horus, online learning": ["--policy", "horus", "--online-learning"],
    "horus, learning + migration": ["--policy", "horus", "--online-learning", "--migration"],
    "horus, decisions from truth": ["--policy", "horus", "--decide-with", "truth"],
    "baselines": ["--policy", "exclusive,binpack"],
}
# The H200 was measured time-sliced (no MPS): with --time-sliced, horus's predictions say so
# (prediction/timeslicing.py); binpack and decisions from truth do not read predicted slowdowns.
TIME_SLICED = ("horus, predictions", "horus, online learning", "horus, learning + migration")


def truth_table(out: Path) -> Path:
    """The measured pairs as a truth CSV: slowdowns averaged over the runs, busy fractions alone."""
    pairs = pd.read_csv(PAIRS_CSV)
    pairs = pairs[pairs["loop"] == LOOP].assign(
        slowdown_a=lambda p: p.tput_a_alone / p.tput_a_shared,
        slowdown_b=lambda p: p.tput_b_alone / p.tput_b_shared,
    )
    alone = pd.read_csv(ISOLATED_CSV)
    alone = alone[alone["loop"] == LOOP].groupby(["model", "batch"])[["tput_alone", "gpu_util"]].mean()
    path = out / "h200_truth.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(TRUTH_COLUMNS)
        keys = ["model_a", "batch_a", "model_b", "batch_b"]
        for (model_a, batch_a, model_b, batch_b), rows in pairs.groupby(keys):
            tput_a, util_a = alone.loc[(model_a, batch_a)]
            tput_b, util_b = alone.loc[(model_b, batch_b)]
            shared_a, shared_b = tput_a / rows.slowdown_a.mean(), tput_b / rows.slowdown_b.mean()
            writer.writerow(
                [
                    "h200",
                    model_a,
                    batch_a,
                    model_b,
                    batch_b,
                    tput_a,
                    tput_b,
                    shared_a,
                    shared_b,
                    util_a,
                    util_b,
                ]
            )
    return path


def workload(out: Path, jobs: int, gap_s: float, seed: int) -> Path:
    """Single-GPU jobs of the measured configurations: Poisson arrivals, log-normal lengths alone."""
    rng = np.random.default_rng(seed)
    configs = sorted(
        {(m, int(b)) for m, b in pd.read_csv(ISOLATED_CSV)[["model", "batch"]].itertuples(index=False)}
    )
    submit = np.cumsum(rng.exponential(gap_s, size=jobs))
    lengths = rng.lognormal(np.log(7200.0), 1.0, size=jobs)
    chosen = rng.integers(len(configs), size=jobs)
    path = out / "workload.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["job_id", "submit_s", "gpus", "duration_s", "model", "batch_size"])
        for i in range(jobs):
            model, batch = configs[chosen[i]]
            writer.writerow([f"job-{i}", f"{submit[i]:.1f}", 1, f"{lengths[i]:.1f}", model, batch])
    return path


def simulate(mode: str, args: argparse.Namespace, truth: Path, jobs: Path) -> dict[str, Any]:
    output = args.out / "runs" / mode.replace(", ", "-").replace(" ", "_")
    models = str(args.models or SHIPPED_MODELS)
    command = [
        str(HORUS), "simulate", "--workload", str(jobs), "--gpu", "h200", "--gpus", str(args.gpus),
        "--seed", str(args.seed), "--truth", str(truth), "--models", models, "--truth-models", models,
        *MODES[mode], *(["--time-sliced"] if args.time_sliced and mode in TIME_SLICED else []),
        "--output", str(output),
    ]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads((output / "summary.json").read_text())


def rows(summaries: dict[str, dict[str, Any]], jobs: int) -> dict[str, dict[str, float]]:
    by_row = {mode: summaries[mode]["horus"] for mode in MODES if mode != "baselines"}
    by_row |= {policy: summaries["baselines"][policy] for policy in ("binpack", "exclusive")}
    binpack = by_row["binpack"]
    return {
        name: {
            "makespan_h": s["makespan_s"] / 3600,
            "mean_jct_h": s["mean_jct_s"] / 3600,
            "qos_violations": s["qos_violations"],
            "truth_coverage": s.get("truth_coverage"),
            "makespan_vs_binpack": s["makespan_s"] / binpack["makespan_s"],
            "mean_jct_vs_binpack": s["mean_jct_s"] / binpack["mean_jct_s"],
            "violations_vs_binpack": s["qos_violations"] / max(1, binpack["qos_violations"]),
            "violations_share": s["qos_violations"] / jobs,
        }
        for name, s in by_row.items()
    }


def table(result: dict[str, dict[str, float]]) -> str:
    lines = [
        "| decisions | makespan (h) | / binpack | mean JCT (h) | / binpack | QoS violations | / binpack "
        "| share of jobs | truth coverage |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in result.items():
        lines.append(
            f"| {name} | {row['makespan_h']:.1f} | {row['makespan_vs_binpack']:.3f} "
            f"| {row['mean_jct_h']:.2f} | {row['mean_jct_vs_binpack']:.3f} | {row['qos_violations']} "
            f"| {row['violations_vs_binpack']:.3f} | {row['violations_share']:.2%} "
            f"| {row['truth_coverage']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--gpus", type=int, default=16)
    parser.add_argument("--gap", type=float, default=600.0, help="mean seconds between arrivals")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--models", type=Path, default=None, help="models directory (default: the shipped one)"
    )
    parser.add_argument(
        "--time-sliced", action="store_true", help="horus predicts as for time-sliced GPUs (--time-sliced)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "out" / "h200_sim")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    truth, jobs = truth_table(args.out), workload(args.out, args.jobs, args.gap, args.seed)
    result = rows({mode: simulate(mode, args, truth, jobs) for mode in MODES}, args.jobs)
    (args.out / "h200_sim.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))


if __name__ == "__main__":
    main()
