"""The co-location tables of `data/colocation/` from runs of hack/gpu_pairs.py (pandas only).

    python hack/gpu_pairs_tables.py --gpu h200 --out data/colocation data/device/2026-12-04-h200/run-*

A run measures every configuration alone twice, before and after its pairs; a job's alone rate here is
the mean of the two, so a pair's slowdown is read against the alone rate around it rather than the
first one alone (the launch-bound jobs drifted by up to a quarter between the two). Writes
`<gpu>_isolated.csv` (one row per configuration and run) and `<gpu>_pairs.csv` (Gavel's columns,
`data/README.md`, then `run` and `loop`: whether the loop read its loss back each step).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def tables(runs: list[Path], gpu: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    isolated, pairs = [], []
    for run in runs:
        loop = "loss read each step" if _reads_loss(run) else "no host sync"
        alone = pd.read_csv(run / "isolated.csv")
        means = alone.groupby(["model", "batch"], sort=False).agg(
            tput_alone=("tput_alone", "mean"),
            tput_alone_spread=("tput_alone", lambda t: t.max() / t.min() - 1),
            gpu_util=("gpu_util_mean", "mean"),
            process_memory_mib=("process_mem_mib", "max"),
            torch_peak_mib=("torch_peak_mib", "max"),
        )
        isolated.append(means.reset_index().assign(gpu=gpu, run=run.name, loop=loop))
        rate = means["tput_alone"].to_dict()
        shared = pd.read_csv(run / "pairs.csv").assign(gpu=gpu, run=run.name, loop=loop)
        shared["tput_a_alone"] = [rate[(m, b)] for m, b in zip(shared.model_a, shared.batch_a, strict=True)]
        shared["tput_b_alone"] = [rate[(m, b)] for m, b in zip(shared.model_b, shared.batch_b, strict=True)]
        pairs.append(shared.drop(columns=["gpu_util_mean"]))
    columns = ["gpu", "model", "batch", "tput_alone", "tput_alone_spread", "gpu_util"]
    columns += ["process_memory_mib", "torch_peak_mib", "run", "loop"]
    iso = pd.concat(isolated)[columns]
    return iso, pd.concat(pairs)


def _reads_loss(run: Path) -> bool:
    """Whether the run's loop read its loss back each step (`--read-loss`; runs before it did not)."""
    return bool(json.loads((run / "provenance.json").read_text()).get("loss_read_each_step"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--gpu", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    isolated, pairs = tables(args.runs, args.gpu)
    isolated.to_csv(args.out / f"{args.gpu}_isolated.csv", index=False, float_format="%.4f")
    pairs.to_csv(args.out / f"{args.gpu}_pairs.csv", index=False, float_format="%.4f")


if __name__ == "__main__":
    main()
