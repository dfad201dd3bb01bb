"""Does Horus beat interference-blind packing on a GPU its models never saw? (issue 25, item 5)

    .venv/bin/python bench/unseen_gpu.py [--gpus v100,p100,k80] [--seed 1] [--jobs 2]
                                         [--reuse-models] [--tabulate-only] [--out out/online_learning]

For each GPU type G in the project's measured pairs (Gavel's K80, P100, V100), the runs of
bench/online_learning.py (`online_learning.run`, the same helpers: models trained without any
measurement taken on G, horus-2500 on 64 G GPUs progressing by G's measured pairs): horus from
predictions, with online learning, with learning and migration, decisions from truth, binpack and
exclusive. One table: makespan, mean JCT and QoS violations of each, each as a ratio to binpack's
from the same run. `--tabulate-only` reads the runs already in OUT (an online-learning run's) instead
of simulating again. Writes OUT/unseen_gpu.json and OUT/unseen_gpu.md; docs/evaluation.md quotes
the table. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import online_learning

ROWS = (  # table row -> (run directory suffix, policy in its summary)
    ("horus, predictions", "none", "horus"),
    ("horus, online learning", "online", "horus"),
    ("horus, learning + migration", "migration", "horus"),
    ("horus, decisions from truth", "truth", "horus"),
    ("binpack", "baselines", "binpack"),
    ("exclusive", "baselines", "exclusive"),
)


def gpu_rows(runs: Path, gpu: str) -> dict[str, dict[str, float]]:
    """Each row's makespan, mean JCT and violations, and their ratios to binpack's."""
    summaries = {mode: online_learning.load(runs / f"{gpu}-{mode}")[0] for _, mode, _ in ROWS}
    binpack = summaries["baselines"]["binpack"]
    rows = {}
    for name, mode, policy in ROWS:
        summary = summaries[mode][policy]
        rows[name] = {
            "makespan_h": summary["makespan_s"] / 3600,
            "mean_jct_h": summary["mean_jct_s"] / 3600,
            "qos_violations": summary["qos_violations"],
            "jobs": summary["jobs"],
            "makespan_vs_binpack": summary["makespan_s"] / binpack["makespan_s"],
            "mean_jct_vs_binpack": summary["mean_jct_s"] / binpack["mean_jct_s"],
            "violations_vs_binpack": summary["qos_violations"] / max(1, binpack["qos_violations"]),
        }
    return rows


def table(results: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    lines = [
        "| GPU (never seen by the models) | decisions | makespan (h) | / binpack | mean JCT (h) | / binpack "
        "| QoS violations | share of jobs | / binpack |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu, rows in results.items():
        for name, row in rows.items():
            lines.append(
                f"| {gpu} | {name} | {row['makespan_h']:.1f} | {row['makespan_vs_binpack']:.3f} "
                f"| {row['mean_jct_h']:.1f} | {row['mean_jct_vs_binpack']:.3f} | {row['qos_violations']} "
                f"| {row['qos_violations'] / row['jobs']:.2%} | {row['violations_vs_binpack']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def tabulate(gpus: Sequence[str], out: Path) -> dict[str, Any]:
    return {gpu: gpu_rows(out / "runs", gpu) for gpu in gpus}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    online_learning.add_run_arguments(parser)
    parser.add_argument("--tabulate-only", action="store_true", help="read the runs already in OUT")
    args = parser.parse_args()
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    if not args.tabulate_only:
        online_learning.run(gpus, args.seed, args.jobs, args.reuse_models, args.out)
    results = tabulate(gpus, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "unseen_gpu.json").write_text(
        json.dumps({"seed": args.seed, "results": results}, indent=2) + "\n"
    )
    (args.out / "unseen_gpu.md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
