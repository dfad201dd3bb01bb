"""Predicted ÷ measured over the published LLM fine-tuning peaks (issue 45, item 1).

    .venv/bin/python bench/published_peaks.py [--out out/published_peaks.json]

Predicts every row of data/memory/published_peaks.csv the DLJob spec can express (full or LoRA
fine-tuning on one GPU, an optimizer it knows, a stated sequence length, a config in
examples/huggingface/) through the config route (`transformer.describe`, the shipped memory model),
twice: as the spec counts it now (weightsDtype from the row's base dtype, SDPA attention) and as it
counted before issue 45 (FP32 weights with autocast copies, eager attention). Beside them a constant
baseline: each source's peaks predicted by the median peak of the other sources. Nothing is refitted:
the shipped memory model is used as is. Prints the markdown table docs/prediction.md quotes and why
each skipped row was skipped; asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from horus_operator.prediction import artifacts, features, transformer
from horus_operator.prediction.gpus import normalize_gpu

REPO = Path(__file__).resolve().parents[1]
PEAKS_CSV = REPO / "data" / "memory" / "published_peaks.csv"
CONFIGS = REPO / "examples" / "huggingface"
MIB_PER_GIB = 1024.0
# The published models whose architecture a config in examples/huggingface/ holds: a fine-tuned or
# later release of the same shape (Llama-3.1-8B has Llama-3-8B's; Mistral-7B v0.2 v0.1's, its sliding
# window, which the count does not read, aside).
CONFIG_FILES: Mapping[str, str] = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b.json",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b.json",
    "meta-llama/Meta-Llama-3.1-8B": "llama-3-8b.json",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b.json",
    "meta-llama/Llama-3.2-3B": "llama-3.2-3b.json",
    "meta-llama/Llama-3.2-3B-Instruct": "llama-3.2-3b.json",
    "mistralai/Mistral-7B-v0.1": "mistral-7b-v0.1.json",
    "unsloth/Mistral-7B-v0.2": "mistral-7b-v0.1.json",
}
OPTIMIZERS: Mapping[str, str] = {"adamw": "adamw", "adamw_fused": "adamw", "sgd": "sgd"}
# The published target names (data/memory/README.md) as module names of the config route.
TARGET_GROUPS: Mapping[str, tuple[str, ...]] = {
    "mlp": ("gate_proj", "up_proj", "down_proj"),
    "self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
}
BEFORE = {"weights_dtype": "fp32", "attention": "eager"}  # how every job was counted before issue 45


def skip_reason(row: Mapping[str, str]) -> str | None:
    """Why the spec cannot express the row; None where it can."""
    checks = (
        (row["method"] not in ("full", "lora"), f"method {row['method']}"),
        (row["gpus"] != "1", "more than one GPU (sharded)"),
        (row["optimizer"] not in OPTIMIZERS, f"optimizer {row['optimizer'] or 'not stated'}"),
        (not row["sequence_length"], "no sequence length"),
        (row["hf_config"] not in CONFIG_FILES, "no config in examples/huggingface/"),
    )
    return next((reason for failed, reason in checks if failed), None)


def training(row: Mapping[str, str], **storage: Any) -> transformer.Training:
    """The row's settings as `transformer.Training`; `storage` overrides weights_dtype / attention."""
    lora = None
    if row["method"] == "lora":
        targets = [name for target in row["lora_targets"].split(";") if target for name in _modules(target)]
        lora = transformer.Lora(int(row["lora_rank"]), tuple(targets))
    return transformer.Training(
        sequence_length=int(row["sequence_length"]),
        optimizer=OPTIMIZERS[row["optimizer"]],
        lora=lora,
        gradient_checkpointing=row["activation_checkpointing"] == "true",
        **{"weights_dtype": row["base_dtype"], **storage},
    )


def _modules(target: str) -> tuple[str, ...]:
    return TARGET_GROUPS.get(target, (target,))


def predicted_gib(row: Mapping[str, str], **storage: Any) -> float:
    config = json.loads((CONFIGS / CONFIG_FILES[row["hf_config"]]).read_text())
    profile = transformer.describe(config, training(row, **storage)).profile
    job = features.at_batch(profile, int(row["batch_size"]))
    gpu = normalize_gpu(row["gpu"]) if row["gpu"] else None
    return artifacts.load().memory.memory_mib(job, row["precision"], gpu) / MIB_PER_GIB


def scores(ratio: np.ndarray) -> dict[str, float]:
    return {
        "rows": len(ratio),
        "median": float(np.median(ratio)),
        "min": float(ratio.min()),
        "max": float(ratio.max()),
        "under_0.9": int((ratio < 0.9).sum()),
    }


def report(rows: list[dict[str, str]]) -> dict[str, Any]:
    measured = np.array([float(row["peak_gib"]) for row in rows])
    sources = np.array([row["source"] for row in rows])
    constant = np.array([np.median(measured[sources != source]) for source in sources])
    ratios = {
        "now": np.array([predicted_gib(row) for row in rows]) / measured,
        "before": np.array([predicted_gib(row, **BEFORE) for row in rows]) / measured,
        "constant": constant / measured,
    }
    groups = {str(source): sources == source for source in sorted(set(sources))}
    groups["pooled"] = np.ones(len(rows), dtype=bool)
    return {group: {name: scores(r[mask]) for name, r in ratios.items()} for group, mask in groups.items()}


def _cells(s: Mapping[str, float]) -> str:
    return f"{s['median']:.2f} | {s['min']:.2f}–{s['max']:.2f} | {s['under_0.9']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the numbers as JSON")
    args = parser.parse_args()
    with PEAKS_CSV.open(newline="") as handle:
        table = list(csv.DictReader(handle))
    skipped = Counter(reason for row in table if (reason := skip_reason(row)) is not None)
    rows = [row for row in table if skip_reason(row) is None]
    print(f"{len(rows)} of {len(table)} rows predicted; skipped: {dict(skipped.most_common())}\n")
    result = report(rows)
    print("| source | rows | now: median | min–max | under 0.9 | before: median | min–max | under 0.9 "
          "| constant: median | min–max | under 0.9 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for group, by_name in result.items():
        cells = " | ".join(_cells(by_name[name]) for name in ("now", "before", "constant"))
        print(f"| {group} | {by_name['now']['rows']} | {cells} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"skipped": skipped, "scores": result}, indent=2))


if __name__ == "__main__":
    main()
