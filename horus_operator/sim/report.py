"""Writes a comparison to disk (summary.json, details.json, per-job CSVs, PNG plots) and as a text table."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from horus_operator.sim.results import JobRecord, RunResult

HOUR = 3600.0
PLOT_POINTS = 2000  # time series are thinned to about this many points per policy


def write_outputs(
    output: Path,
    results: Sequence[RunResult],
    summaries: Mapping[str, dict[str, Any]],
    extra: Mapping[str, Any],
) -> list[Path]:
    """Everything a run produces; returns the plot paths."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "summary.json").write_text(json.dumps(summaries, indent=2) + "\n")
    (output / "details.json").write_text(json.dumps(extra, indent=2) + "\n")
    for result in results:
        write_jobs_csv(output / f"jobs_{result.policy}.csv", result.records)
    return write_plots(output, results, summaries)


def write_jobs_csv(path: Path, records: Sequence[JobRecord]) -> None:
    names = [f.name for f in fields(JobRecord)]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*names, "wait_s", "jct_s"])
        for record in records:
            values = [getattr(record, name) for name in names]
            values[names.index("gpu_indices")] = " ".join(map(str, record.gpu_indices))
            writer.writerow([*values, record.wait_s, record.jct_s])


def write_plots(
    output: Path, results: Sequence[RunResult], summaries: Mapping[str, dict[str, Any]]
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []

    def save(figure: Any, name: str) -> None:
        figure.tight_layout()
        figure.savefig(output / name, dpi=110)
        plt.close(figure)
        paths.append(output / name)

    figure, axes = plt.subplots(figsize=(6, 4))
    for result in results:
        jct = sorted(record.jct_s / HOUR for record in result.records)
        axes.plot(jct, [(i + 1) / len(jct) for i in range(len(jct))], label=result.policy)
    axes.set(xlabel="job completion time (h)", ylabel="fraction of jobs", title="JCT CDF")
    axes.legend()
    save(figure, "jct_cdf.png")

    for attribute, label, name in (
        ("busy_gpus", "busy GPUs", "busy_gpus.png"),
        ("normalised_throughput", "normalised throughput (GPU-equivalents)", "throughput.png"),
    ):
        figure, axes = plt.subplots(figsize=(7, 4))
        for result in results:
            step = max(1, len(result.samples) // PLOT_POINTS)
            thinned = result.samples[::step]
            axes.step(
                [s.time_s / HOUR for s in thinned],
                [getattr(s, attribute) for s in thinned],
                where="post",
                label=result.policy,
            )
        axes.set(xlabel="time (h)", ylabel=label, title=f"{label} over time")
        axes.legend()
        save(figure, name)

    figure, axes = plt.subplots(figsize=(6, 4))
    policies = list(summaries)
    axes.bar(policies, [summaries[p]["makespan_s"] / HOUR for p in policies])
    bound = next(iter(summaries.values()))["lower_bound_makespan_s"] / HOUR
    axes.axhline(bound, color="black", linestyle="--", label="one-job-per-GPU lower bound")
    axes.set(ylabel="makespan (h)", title="Makespan")
    axes.legend()
    save(figure, "makespan.png")
    return paths


def useful_work(summary: Mapping[str, Any]) -> float:
    """Isolated-equivalent GPU-seconds of training done per GPU-second of the run: busy fraction x
    normalised throughput. The paper's "GPU utilization" gain is the closest thing to its ratio."""
    return float(summary["gpu_busy_fraction"] * summary["normalised_throughput_per_gpu"])


def table(summaries: Mapping[str, dict[str, Any]], reference: str = "horus") -> str:
    """The paper-style comparison: each metric per policy, then the reference policy's ratio to each."""
    summaries = {name: {**values, "useful_work": useful_work(values)} for name, values in summaries.items()}
    policies = list(summaries)
    rows = [
        ("jobs run", "jobs", 1.0, "{:.0f}"),  # fewer than submitted when some fit no node (details.json)
        ("makespan (h)", "makespan_s", HOUR, "{:.1f}"),
        ("mean JCT (h)", "mean_jct_s", HOUR, "{:.1f}"),
        ("p99 JCT (h)", "p99_jct_s", HOUR, "{:.1f}"),
        ("mean wait (h)", "mean_wait_s", HOUR, "{:.1f}"),
        ("GPU busy", "gpu_busy_fraction", 0.01, "{:.1f}%"),
        ("norm. throughput/GPU", "normalised_throughput_per_gpu", 1.0, "{:.3f}"),
        ("work per GPU-second", "useful_work", 1.0, "{:.3f}"),
        ("QoS violations", "qos_violations", 1.0, "{:.0f}"),
        ("truth coverage", "truth_coverage", 1.0, "{:.3f}"),
    ]
    width = max(12, *(len(p) + 2 for p in policies))
    lines = ["metric".ljust(22) + "".join(p.rjust(width) for p in policies)]
    for label, key, scale, shape in rows:
        cells = [shape.format(summaries[p][key] / scale).rjust(width) for p in policies]
        lines.append(label.ljust(22) + "".join(cells))
    bound = next(iter(summaries.values()))["lower_bound_makespan_s"]
    lines.append(f"one-job-per-GPU lower bound on makespan: {bound / HOUR:.1f} h")
    if reference in summaries:
        mine = summaries[reference]
        lines.append(f"{reference} makespan / lower bound: {mine['makespan_s'] / bound:.3f}")
        for other in policies:
            if other == reference:
                continue
            theirs = summaries[other]
            ratios = ", ".join(
                f"{label} {mine[key] / theirs[key]:.3f}×" if theirs[key] else f"{label} n/a"
                for label, key in (
                    ("makespan", "makespan_s"),
                    ("mean JCT", "mean_jct_s"),
                    ("mean wait", "mean_wait_s"),
                    ("work per GPU-second", "useful_work"),
                )
            )
            lines.append(f"{reference} vs {other}: {ratios}")
    return "\n".join(lines)
