"""Leave-one-source-out check of the memory envelope over every measured peak (issue 26, item 3).

    .venv/bin/python bench/memory_loso.py [--out out/memory_loso.json]

Reads every measured-peak source in data/memory/ (`memory_fit.all_peaks`: PyTorch's and TensorFlow's),
refits the envelope above the per-process floors and the framework overheads without each source (and,
as before, without each GPU and each architecture family), predicts the held-out peaks and prints
predicted ÷ measured as the markdown tables docs/prediction.md quotes: per held-out group, and every
peak pooled. One source (MISO) holds every TensorFlow peak, so leaving it out leaves no TensorFlow
peak to fit on; the TensorFlow peaks are also shown with each of their models held out, and under the
shipped model. Then the process floor table, and the spread of ln(predicted ÷ measured) per source of
prediction that `prediction/memory_spread.py` ships (issue 45, item 4): the catalog's graphs and the
config route, each peak held out by source, the config route with the published fine-tuning peaks
(`bench/published_peaks.py`, nothing fitted on them), and repeated milabench runs of one configuration
for an observed peak. Issue 26's bounds (no held-out peak more than 10 % under,
pooled median ≤ 1.4) are asserted by tests/unit/prediction/test_memory_loso.py; this script asserts
nothing. Writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from horus_operator.prediction import artifacts, catalog, memory, memory_spread
from horus_operator.prediction.training import memory_fit

REPO = Path(__file__).resolve().parents[1]
MEMORY_DIR = REPO / "data" / "memory"
PAIRS_CSV = REPO / "data" / "colocation" / "gavel_pairs_train.csv"


def _row(name: str, scores: dict[str, float]) -> str:
    return (
        f"| {name} | {scores['samples']} | {scores['min_predicted_over_measured']:.2f} "
        f"| {scores['share_under_10pct']:.2f} | {scores['median_predicted_over_measured']:.2f} |"
    )


def held_out_tables(
    peaks: pd.DataFrame, singles: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> dict[str, Any]:
    measured = peaks["measured_mib"].to_numpy()
    report: dict[str, Any] = {}
    for split in memory_fit.SPLITS:
        ratio = memory_fit.held_out_predictions(peaks, singles, split) / measured
        groups = {
            str(group): memory_fit.ratio_scores(ratio[(peaks[split] == group).to_numpy()])
            for group in sorted(set(peaks[split]))
        }
        report[split] = {
            "groups": groups,
            "pooled": memory_fit.ratio_scores(ratio),
            "constant": memory_fit.ratio_scores(
                _constant_held_out(peaks[split].to_numpy(), measured) / measured
            ),
        }
    return report


def _constant_held_out(groups: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """The constant baseline of the same split: each held-out peak predicted as the largest peak of the
    other groups (the one constant that under-predicts none of its own training peaks)."""
    predicted = np.empty_like(measured, dtype=float)
    for group in set(groups):
        held = groups == group
        predicted[held] = measured[~held].max()
    return predicted


def by_route(peaks: pd.DataFrame) -> np.ndarray:
    """Per peak, the source of prediction its job is counted by (`memory_spread.source_of`): its memory
    terms (a Hugging Face config, a stated optimizer) or its graph alone (every graph here a catalog
    model's, at its own or another input shape)."""
    return np.array([memory_spread.source_of(job) for job in peaks["features"]])


def repeat_spread(milabench_csv: Path) -> tuple[memory_spread.MemorySpread, float]:
    """How far one reading of a job's peak is from another of the same job (an observed peak's spread):
    the log sd of milabench's repeated runs of one configuration about their configuration's mean (its
    degrees of freedom the runs less the configurations), and the largest max ÷ min of one."""
    runs = pd.read_csv(milabench_csv)
    keys = ["gpu", "bench", "precision_arg", "batch_size"]
    repeated = runs[runs.groupby(keys)["memory_mib"].transform("count") > 1]
    logs = np.log(repeated["memory_mib"])
    grouped = logs.groupby([repeated[k] for k in keys])
    deviation = (logs - grouped.transform("mean")).to_numpy()
    sd = float(np.sqrt(np.sum(deviation**2) / (len(repeated) - grouped.ngroups)))
    widest = float(np.exp((grouped.max() - grouped.min()).max()))
    return memory_spread.MemorySpread(bias=0.0, sd=round(sd, 4), samples=len(repeated)), widest


def memory_spreads(peaks: pd.DataFrame, held_out: np.ndarray) -> dict[str, dict[str, float]]:
    """The spread per source of prediction (`memory_spread.MEMORY_SPREADS`), from `held_out`: each
    peak's prediction with its source held out."""
    import published_peaks  # bench/, beside this script

    ratio = held_out / peaks["measured_mib"].to_numpy()
    route = by_route(peaks)
    published = published_peaks.now_ratios()
    ratios = {
        memory_spread.GRAPH: ratio[route == memory_spread.GRAPH],
        "config route, source held out": ratio[route == memory_spread.CONFIG],
        "published fine-tuning peaks": published,
        memory_spread.CONFIG: np.concatenate([ratio[route == memory_spread.CONFIG], published]),
    }
    report = {name: _spread_row(memory_spread.log_spread(r), float(r.min())) for name, r in ratios.items()}
    observed, widest = repeat_spread(MEMORY_DIR / "milabench_scaling_nvidia.csv")
    report[memory_spread.OBSERVED] = {
        **_spread_row(observed, 1.0 / widest),
        "widest_repeat": round(widest, 4),
    }
    return report


def _spread_row(spread: memory_spread.MemorySpread, least: float) -> dict[str, float]:
    return {
        "peaks": spread.samples,
        "bias": spread.bias,
        "sd": spread.sd,
        "least": round(least, 3),
        "upper_factor": round(spread.upper_factor(), 3),
    }


def tensorflow_rows(predicted: np.ndarray, peaks: pd.DataFrame) -> list[dict[str, Any]]:
    """Per TensorFlow model: its peaks, measured and as `predicted` (one value per row of `peaks`)."""
    tensorflow = (peaks["runtime"] == "tensorflow").to_numpy()
    frame = peaks[tensorflow].assign(predicted_mib=predicted[tensorflow])
    rows = []
    for name, group in frame.groupby("model"):
        ratio = group["predicted_mib"].to_numpy() / group["measured_mib"].to_numpy()
        rows.append(
            {
                "model": str(name),
                "batches": [int(b) for b in group["batch"]],
                "measured_mib": [float(m) for m in group["measured_mib"]],
                "predicted_mib": [round(float(p)) for p in group["predicted_mib"]],
                "min_ratio": round(float(ratio.min()), 2),
                "max_ratio": round(float(ratio.max()), 2),
            }
        )
    return rows


def _print_tensorflow(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n{title}\n")
    print("| model | batch | measured MiB | predicted MiB | predicted / measured |\n|---|---|---|---|---|")
    for row in rows:
        batches = ", ".join(map(str, row["batches"]))
        measured = ", ".join(f"{m:,.0f}" for m in row["measured_mib"])
        predicted = ", ".join(f"{p:,}" for p in row["predicted_mib"])
        ratios = f"{row['min_ratio']}-{row['max_ratio']}"
        print(f"| {row['model']} | {batches} | {measured} | {predicted} | {ratios} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "out" / "memory_loso.json")
    args = parser.parse_args()
    peaks = memory_fit.all_peaks(MEMORY_DIR, catalog.lookup)
    model = artifacts.load().memory
    singles = memory_fit.gavel_singles(PAIRS_CSV, catalog.lookup)
    report = {
        "held_out": held_out_tables(peaks, singles),
        "tensorflow_model_held_out": tensorflow_rows(
            memory_fit.held_out_predictions(peaks, singles, "model"), peaks
        ),
        "tensorflow_shipped": tensorflow_rows(memory_fit.predicted_peaks(model, peaks), peaks),
        "shipped": model.to_dict(),
    }
    report["memory_spread"] = memory_spreads(peaks, memory_fit.held_out_predictions(peaks, singles, "source"))
    header = "| held out (refitted without it) | peaks | least predicted / measured | share > 10 % under | median |"  # noqa: E501
    for split, tables in report["held_out"].items():
        print(f"\nleave one {split} out\n\n{header}\n|---|---|---|---|---|")
        for group, scores in tables["groups"].items():
            print(_row(group, scores))
        print(_row("**every peak, each held out**", tables["pooled"]))
        print(_row("constant baseline (largest training peak), same split", tables["constant"]))
    _print_tensorflow(
        "TensorFlow peaks (MISO, A100-40GB), each model held out", report["tensorflow_model_held_out"]
    )
    _print_tensorflow("TensorFlow peaks under the shipped model", report["tensorflow_shipped"])
    with memory.PROCESS_FLOOR_FILE.open(encoding="utf-8") as handle:
        floors = [row for row in csv.DictReader(handle) if row["derivation"] == "measured"]
    print(
        "\nmeasured process floors: "
        + ", ".join(f"{r['generation']}/{r['runtime']} {r['floor_mib']} MiB" for r in floors)
    )
    print(
        "\nln(predicted ÷ measured) per source of prediction (prediction/memory_spread.py)\n\n"
        "| source | peaks | bias (mean) | sd | least predicted / measured | upper bound factor |\n"
        "|---|---|---|---|---|---|"
    )
    for name, row in report["memory_spread"].items():
        print(
            f"| {name} | {row['peaks']} | {row['bias']:.3f} | {row['sd']:.4f} | {row['least']:.3f} "
            f"| {row['upper_factor']:.3f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
