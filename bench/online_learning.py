"""Does online correction recover from a model that never saw the cluster's GPU? (issue 16, item 5)

    .venv/bin/python bench/online_learning.py [--gpus v100,p100,k80] [--seed 1] [--jobs 2]
                                             [--reuse-models] [--out out/online_learning]

For each Gavel GPU G, in one run:
1. `hack/train_models.py --exclude-gpu G` trains the shipped model types without any measurement taken
   on G (into OUT/models/without-G; `--reuse-models` keeps ones already there);
2. `horus simulate --workload horus-2500 --gpu G --models OUT/models/without-G --truth-models <shipped>`
   runs the trace on 64 G GPUs, jobs progressing by G's measured pairs (where the table has no pair,
   by the shipped models, which did see G: the deciding model never stands in for truth), with
   decisions from: the leave-G-out model alone (`none`); the same model corrected online
   (`online`, `--online-learning`); corrected online and moving jobs (`migration`, `--online-learning
   --migration`: every job allows it, 30 s grace, 120 s restart cost); measured truth (`truth`,
   `--decide-with truth`, the oracle); and the exclusive and binpack baselines;
3. per decision mode: QoS violations, job-hours over maxSlowdown, moves, makespan / exclusive's, mean
   JCT / binpack's, over the whole trace and per quarter of it (jobs in arrival order; a quarter's
   makespan is its first arrival to its last completion).
Writes OUT/results.json, OUT/table.md and OUT/learning_curve.png; docs/evaluation.md ("Online
learning") quotes them. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHIPPED_MODELS = REPO / "horus_operator" / "prediction" / "models"
HORUS = Path(sys.executable).parent / "horus"
MODES = {  # decision mode -> horus simulate flags
    "none": ["--policy", "horus"],
    "online": ["--policy", "horus", "--online-learning"],
    "migration": ["--policy", "horus", "--online-learning", "--migration"],
    "truth": ["--policy", "horus", "--decide-with", "truth"],
    "baselines": ["--policy", "exclusive,binpack"],
}
DECISIONS = ("none", "online", "migration", "truth")


def train_without(gpu: str, models: Path, reuse: bool) -> Path:
    directory = models / f"without-{gpu}"
    if reuse and (directory / "metadata.json").is_file():
        return directory
    command = [
        sys.executable,
        str(REPO / "hack" / "train_models.py"),
        "--exclude-gpu",
        gpu,
        "--out",
        str(directory),
    ]
    print(f"training without {gpu} ...", flush=True)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return directory


def simulate(gpu: str, mode: str, models: Path, seed: int, out: Path) -> tuple[str, str, Path]:
    output = out / "runs" / f"{gpu}-{mode}"
    command = [
        str(HORUS), "simulate", "--workload", "horus-2500", "--gpu", gpu, "--seed", str(seed),
        "--models", str(models), "--truth-models", str(SHIPPED_MODELS), *MODES[mode], "--output", str(output),
    ]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    print(f"  {gpu} {mode} done", flush=True)
    return gpu, mode, output


def load(output: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads((output / "summary.json").read_text()), json.loads(
        (output / "details.json").read_text()
    )


def compare(runs: Mapping[str, Path]) -> dict[str, Any]:
    """One GPU's decision modes against its baselines, overall and per quarter."""
    summaries, details = load(runs["baselines"])
    exclusive, binpack = summaries["exclusive"], summaries["binpack"]
    exclusive_q, binpack_q = details["exclusive"]["quarters"], details["binpack"]["quarters"]
    compared: dict[str, Any] = {}
    for mode in DECISIONS:
        summary, detail = (part["horus"] for part in load(runs[mode]))
        quarters = detail["quarters"]
        compared[mode] = {
            "qos_violations": summary["qos_violations"],
            "over_limit_job_hours": detail["over_limit_job_hours"],
            "moves": (detail.get("migration") or {}).get("by_trigger", {}),
            "makespan_vs_exclusive": summary["makespan_s"] / exclusive["makespan_s"],
            "mean_jct_vs_binpack": summary["mean_jct_s"] / binpack["mean_jct_s"],
            "makespan_h": summary["makespan_s"] / 3600,
            "truth_coverage": summary["truth_coverage"],
            "quarters": [
                {
                    "qos_violations": q["qos_violations"],
                    "qos_violation_rate": q["qos_violation_rate"],
                    "makespan_vs_exclusive": q["span_s"] / e["span_s"],
                    "mean_jct_vs_binpack": q["mean_jct_s"] / b["mean_jct_s"],
                }
                for q, e, b in zip(quarters, exclusive_q, binpack_q, strict=True)
            ],
            **({"online_learning": detail["online_learning"]} if "online_learning" in detail else {}),
        }
    return compared


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "| GPU | decisions | QoS violations (quarters 1-4) | last quarter | job-hours over the limit | moves "
        "| makespan / exclusive (last quarter) | mean JCT / binpack (last quarter) | samples learned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gpu, modes in results.items():
        for mode in DECISIONS:
            row = modes[mode]
            quarters, last = row["quarters"], row["quarters"][-1]
            learned = row.get("online_learning", {}).get("samples_learned", "")
            by_quarter = " / ".join(str(q["qos_violations"]) for q in quarters)
            moves = ", ".join(f"{n} {trigger}" for trigger, n in sorted(row["moves"].items()))
            lines.append(
                f"| {gpu} | {mode} | {row['qos_violations']} ({by_quarter}) "
                f"| {last['qos_violation_rate']:.2%} | {row['over_limit_job_hours']:.1f} | {moves} "
                f"| {row['makespan_vs_exclusive']:.3f} "
                f"({last['makespan_vs_exclusive']:.3f}) | {row['mean_jct_vs_binpack']:.3f} "
                f"({last['mean_jct_vs_binpack']:.3f}) | {learned} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (
        ("qos_violation_rate", "QoS violation rate"),
        ("makespan_vs_exclusive", "makespan / exclusive"),
        ("mean_jct_vs_binpack", "mean JCT / binpack"),
    )
    figure, axes = plt.subplots(len(metrics), len(results), figsize=(4 * len(results), 8), squeeze=False)
    for column, (gpu, modes) in enumerate(results.items()):
        for row, (key, label) in enumerate(metrics):
            axis = axes[row][column]
            for mode in DECISIONS:
                axis.plot([1, 2, 3, 4], [q[key] for q in modes[mode]["quarters"]], marker="o", label=mode)
            axis.set_xticks([1, 2, 3, 4])
            axis.set_title(f"{gpu}: {label}" if row == 0 else label, fontsize=9)
            if row == len(metrics) - 1:
                axis.set_xlabel("quarter of the trace")
    axes[0][0].legend(title="decisions", fontsize=8)
    figure.suptitle("horus-2500, model trained without the GPU: learning curve", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(gpus: Sequence[str], seed: int, jobs: int, reuse: bool, out: Path) -> dict[str, Any]:
    models = {gpu: train_without(gpu, out / "models", reuse) for gpu in gpus}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        finished = list(
            pool.map(
                lambda task: simulate(*task, seed, out), [(g, m, models[g]) for g in gpus for m in MODES]
            )
        )
    by_gpu: dict[str, dict[str, Path]] = {}
    for gpu, mode, output in finished:
        by_gpu.setdefault(gpu, {})[mode] = output
    return {gpu: compare(by_gpu[gpu]) for gpu in gpus}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `run` (bench/unseen_gpu.py tabulates the same runs)."""
    parser.add_argument("--gpus", default="v100,p100,k80", help="Gavel GPU types, comma-separated")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="simulations at once")
    parser.add_argument("--reuse-models", action="store_true", help="keep leave-one-GPU-out models in OUT")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "online_learning")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    args = parser.parse_args()
    results = run(
        [g.strip() for g in args.gpus.split(",") if g.strip()],
        args.seed,
        args.jobs,
        args.reuse_models,
        args.out,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps({"seed": args.seed, "results": results}, indent=2) + "\n"
    )
    (args.out / "table.md").write_text(table(results))
    plot(results, args.out / "learning_curve.png")
    print(table(results))
    print(f"results: {args.out / 'results.json'}, plot: {args.out / 'learning_curve.png'}")


if __name__ == "__main__":
    main()
