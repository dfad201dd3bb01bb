"""Makespan against the lower bound, side by side in one run (issue #17's evaluation).

For each trace and seed, horus, exclusive and binpack replay the same jobs (decisions from the shipped
predictions, progress from Gavel's measured pairs) and the table reports
- makespan / lower bound: the one-job-per-GPU bound, max(latest arrival + isolated duration, total
  isolated GPU-work / GPUs) (`sim.metrics.lower_bound_makespan_s`); target <= 1.05 on every trace;
- mean JCT / binpack's (target: no worse than before the makespan guard) and QoS violations (<= 1 %).

Traces: `gavel-generator` (Gavel's job generator: 300 single-GPU jobs at time 0 on 32 V100s, seeds
1-5), `horus-2500` (2,500 jobs arriving at twice exclusive capacity on 64 V100s, seeds 1-3) and
`real-mix-900` (900 jobs of 1/2/4/8 GPUs in a real cluster's mix over five days on 8 nodes x 8 V100,
seeds 1-3; issue 46).

`--migration` adds horus moving running jobs (`horus simulate --migration`: every job allows it, 30 s
grace, 120 s restart cost): its makespan over the bound, mean JCT over binpack's, QoS violations,
job-hours over maxSlowdown and moves made, beside horus without.

    .venv/bin/python bench/makespan.py [--seeds N] [--migration] [--out out/bench/makespan.json]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.registry import make_policy
from horus_operator.prediction.measured import gavel_truth
from horus_operator.prediction.predictor import load_predictor
from horus_operator.sim.engine import Simulation
from horus_operator.sim.metrics import details, summarise
from horus_operator.sim.migration import Migration
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, gavel_generator, horus_2500, real_mix_900

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("horus", "exclusive", "binpack")
MOVING = "horus+migration"
TRACES = {
    "gavel-generator": (gavel_generator, 5),
    "horus-2500": (horus_2500, 3),
    "real-mix-900": (real_mix_900, 3),
}


def run_trace(
    scenario: Scenario, truth: Truth, predictor: object, seed: int, migration: bool
) -> dict[str, dict]:
    summaries = {}
    runs = [(name, name, None) for name in POLICIES]
    runs += [(MOVING, "horus", Migration())] if migration else []
    for label, name, moving in runs:
        policy = make_policy(name, predictor=predictor, rng=random.Random(seed))
        cycle = SchedulingCycle(policy)
        result = Simulation(scenario, cycle, truth, migration=moving).run()
        extra = details(result)
        summaries[label] = summarise(result, scenario) | {
            "over_limit_job_hours": extra["over_limit_job_hours"],
            "moves": (extra.get("migration") or {}).get("moves", 0),
            "refused_by_truth": (extra.get("migration") or {}).get("refused_by_truth", 0),
        }
    return summaries


def row(trace: str, seed: int, summaries: dict[str, dict]) -> dict[str, float | int | str]:
    horus, binpack = summaries["horus"], summaries["binpack"]
    bound = horus["lower_bound_makespan_s"]
    return {
        "trace": trace,
        "seed": seed,
        "jobs": horus["jobs"],
        "lower_bound_h": round(bound / 3600, 1),
        **{
            f"{name}_makespan_over_bound": round(summaries[name]["makespan_s"] / bound, 3)
            for name in POLICIES
        },
        "horus_mean_jct_over_binpack": round(horus["mean_jct_s"] / binpack["mean_jct_s"], 3),
        "horus_qos_violations": horus["qos_violations"],
        "horus_over_limit_job_hours": round(horus["over_limit_job_hours"], 1),
        **(_moving(summaries[MOVING], bound, binpack) if MOVING in summaries else {}),
    }


def _moving(summary: dict, bound: float, binpack: dict) -> dict[str, float | int]:
    return {
        "migration_makespan_over_bound": round(summary["makespan_s"] / bound, 3),
        "migration_mean_jct_over_binpack": round(summary["mean_jct_s"] / binpack["mean_jct_s"], 3),
        "migration_qos_violations": summary["qos_violations"],
        "migration_over_limit_job_hours": round(summary["over_limit_job_hours"], 1),
        "migration_moves": summary["moves"],
        "migration_refused_by_truth": summary["refused_by_truth"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds", type=int, help="seeds per trace (default: 5 gavel-generator, 3 horus-2500)"
    )
    parser.add_argument("--migration", action="store_true", help="add horus moving running jobs")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "bench" / "makespan.json")
    args = parser.parse_args()
    table = gavel_truth()
    predictor = load_predictor()
    truth = Truth(table, fallback=predictor)
    rows = []
    header = "trace            seed  bound h  horus/LB  excl/LB  binpack/LB  JCT/binpack  QoS"
    print(header + ("  +migration: LB  JCT/binpack  QoS  moves" if args.migration else ""))
    for trace, (generate, default_seeds) in TRACES.items():
        for seed in range(1, (args.seeds or default_seeds) + 1):
            scenario = generate(table, random.Random(seed))
            r = row(trace, seed, run_trace(scenario, truth, predictor, seed, args.migration))
            rows.append(r)
            moving = (
                f" {r['migration_makespan_over_bound']:>15} {r['migration_mean_jct_over_binpack']:>12}"
                f" {r['migration_qos_violations']:>4} {r['migration_moves']:>6}"
                if args.migration
                else ""
            )
            print(
                f"{trace:<16} {seed:>4} {r['lower_bound_h']:>8} {r['horus_makespan_over_bound']:>9}"
                f" {r['exclusive_makespan_over_bound']:>8} {r['binpack_makespan_over_bound']:>11}"
                f" {r['horus_mean_jct_over_binpack']:>12} {r['horus_qos_violations']:>4}/{r['jobs']}{moving}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
