"""Predicted ÷ measured over the published LLM fine-tuning peaks (issue 45, item 1).

    .venv/bin/python bench/published_peaks.py [--out out/published_peaks.json]

Predicts every row of data/memory/published_peaks.csv the DLJob spec can express (full, LoRA or
QLoRA fine-tuning, on one GPU or sharded by FSDP over several, an optimizer it knows, a stated
sequence length, a config in examples/huggingface/) through the config route (`transformer.describe`,
the shipped memory model; a sharded run's peak is one GPU's), as the spec counts it now: weightsDtype
from the row's base dtype (nf4 for QLoRA), SDPA attention, the row's optimizer, optimizer-in-backward,
chunked loss, activation offloading and sharding. Beside it the same rows as the previous step counted
them (QLoRA as LoRA on a bf16 base, 8-bit and paged AdamW as AdamW, nothing in backward, chunked or
offloaded, every GPU holding the whole model), each of this step's terms left out alone, and a
constant baseline: each source's peaks predicted by the median peak of the other sources. Nothing is
refitted: the shipped memory model is used as is. Prints the markdown tables docs/prediction.md quotes
and why each skipped row was skipped; asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
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
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T": "tinyllama-1.1b.json",
    "meta-llama/Llama-3.2-1B": "llama-3.2-1b.json",
    "meta-llama/Llama-2-7b-hf": "llama-2-7b.json",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b.json",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b.json",
    "meta-llama/Llama-3.1-405B-Instruct": "llama-3.1-405b.json",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b.json",
    "meta-llama/Meta-Llama-3.1-8B": "llama-3-8b.json",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3-8b.json",
    "meta-llama/Llama-3.2-3B": "llama-3.2-3b.json",
    "meta-llama/Llama-3.2-3B-Instruct": "llama-3.2-3b.json",
    "mistralai/Mistral-7B-v0.1": "mistral-7b-v0.1.json",
    "unsloth/Mistral-7B-v0.2": "mistral-7b-v0.1.json",
}
# The published optimizers (data/memory/README.md) as spec.model.huggingface.optimizer names them.
OPTIMIZERS: Mapping[str, str] = {
    "adamw": "adamw",
    "adamw_fused": "adamw_fused",
    "sgd": "sgd",
    "adamw8bit": "adamw8bit",
    "paged_adamw": "paged_adamw",
    "paged_adamw8bit": "paged_adamw8bit",
}
# How many chunks each source's chunked loss cuts a sequence into: torchtune's CEWithChunkedOutputLoss
# 8 (`num_output_chunks`'s default, which its configs keep); LitGPT's LoRA/QLoRA scripts chunks of 128
# tokens (`lm_head_chunk_size=128`).
LITGPT_CHUNK_TOKENS = 128
TORCHTUNE_CHUNKS = 8
# The published target names (data/memory/README.md) as module names of the config route.
TARGET_GROUPS: Mapping[str, tuple[str, ...]] = {
    "mlp": ("gate_proj", "up_proj", "down_proj"),
    "self_attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
}
# Whether each source's recipes reduce FSDP's gradients after every micro-batch of an accumulation:
# torchtune's call `backward()` on each without `no_sync()` (recipes/full_finetune_distributed.py);
# LitGPT's wrap the accumulating ones in Fabric's `no_backward_sync`, FSDP's `no_sync()`
# (litgpt/finetune/full.py), which accumulates them unsharded. PEFT's runs are on one GPU.
SYNCS_EACH_BATCH: Mapping[str, bool] = {"torchtune": True, "litgpt": False, "peft": False}
SHARDED = {"none": "none", "fsdp": "fsdp"}  # the published sharding the spec can say (not CPU offload)
Variant = Callable[[transformer.Training], transformer.Training]


def skip_reason(row: Mapping[str, str]) -> str | None:
    """Why the spec cannot express the row; None where it can."""
    checks = (
        (row["method"] not in ("full", "lora", "qlora"), f"method {row['method']}"),
        (row["sharding"] not in SHARDED, f"sharding {row['sharding']}"),
        (row["optimizer"] not in OPTIMIZERS, f"optimizer {row['optimizer'] or 'not stated'}"),
        (not row["sequence_length"], "no sequence length"),
        (not row["activation_checkpointing"], "checkpointing not stated"),
        (row["hf_config"] not in CONFIG_FILES, "no config in examples/huggingface/"),
    )
    return next((reason for failed, reason in checks if failed), None)


def training(row: Mapping[str, str]) -> transformer.Training:
    """The row's settings as `transformer.Training` (a setting the row leaves empty is off)."""
    lora = None
    if row["method"] in ("lora", "qlora"):
        targets = [name for target in row["lora_targets"].split(";") if target for name in _modules(target)]
        lora = transformer.Lora(int(row["lora_rank"]), tuple(targets), float(row["lora_dropout"] or 0))
    return transformer.Training(
        sequence_length=int(row["sequence_length"]),
        optimizer=OPTIMIZERS[row["optimizer"]],
        lora=lora,
        gradient_checkpointing=row["activation_checkpointing"] == "true",
        weights_dtype=row["base_dtype"],
        optimizer_in_backward=row["optimizer_in_backward"] == "true",
        loss_chunks=_loss_chunks(row),
        activation_offloading=row["activation_offloading"] == "true",
        sharding=transformer.shard_over(SHARDED[row["sharding"]], int(row["gpus"])),
        gradient_accumulation_steps=int(row["gradient_accumulation"] or 1),
        sync_each_batch=SYNCS_EACH_BATCH[row["source"]],
    )


def _modules(target: str) -> tuple[str, ...]:
    return TARGET_GROUPS.get(target, (target,))


def _loss_chunks(row: Mapping[str, str]) -> int:
    if row["chunked_cross_entropy"] != "true":
        return 1
    if row["source"] == "litgpt":
        return math.ceil(int(row["sequence_length"]) / LITGPT_CHUNK_TOKENS)
    return TORCHTUNE_CHUNKS


def _as_adamw(training: transformer.Training) -> transformer.Training:
    """8-bit and paged AdamW as torch's AdamW."""
    adamw = "adamw" in training.optimizer
    return dataclasses.replace(training, optimizer="adamw") if adamw else training


def _as_foreach(training: transformer.Training) -> transformer.Training:
    """Adam and AdamW as fused: no scratch in their step."""
    foreach = training.optimizer in ("adam", "adamw")
    return dataclasses.replace(training, optimizer="adamw_fused") if foreach else training


def _without_dropout(training: transformer.Training) -> transformer.Training:
    lora = training.lora
    return dataclasses.replace(training, lora=dataclasses.replace(lora, dropout=0.0)) if lora else training


def _as_bf16(training: transformer.Training) -> transformer.Training:
    """QLoRA as LoRA on a bf16 base."""
    nf4 = training.weights_dtype == transformer.NF4
    return dataclasses.replace(training, weights_dtype="bf16") if nf4 else training


# Each term this step added, left out: the row counted as the previous step could say it.
WITHOUT: Mapping[str, Variant] = {
    "QLoRA (nf4 as bf16)": _as_bf16,
    "8-bit and paged AdamW (as AdamW)": _as_adamw,
    "optimizer in backward": lambda t: dataclasses.replace(t, optimizer_in_backward=False),
    "chunked loss": lambda t: dataclasses.replace(t, loss_chunks=1),
    "activation offloading": lambda t: dataclasses.replace(t, activation_offloading=False),
    "FSDP shards": lambda t: dataclasses.replace(t, sharding=transformer.Sharding()),
    "LoRA dropout": _without_dropout,
    "foreach Adam's step scratch": _as_foreach,
    "FSDP's unsharded accumulation (no_sync)": lambda t: dataclasses.replace(t, sync_each_batch=True),
}


def _previous(training: transformer.Training) -> transformer.Training:
    """The row as the previous step (f8b3a63) counted it: every term of WITHOUT left out."""
    for leave_out in WITHOUT.values():
        training = leave_out(training)
    return training


def predicted_gib(row: Mapping[str, str], variant: Variant = lambda t: t) -> float:
    config = json.loads((CONFIGS / CONFIG_FILES[row["hf_config"]]).read_text())
    profile = transformer.describe(config, variant(training(row))).profile
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


def expressible_rows() -> list[dict[str, str]]:
    """The rows of the published peaks the spec can express (`skip_reason` None)."""
    with PEAKS_CSV.open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if skip_reason(row) is None]


def now_ratios() -> np.ndarray:
    """Predicted ÷ measured of every expressible row under the shipped model (`bench/memory_loso.py`
    reads it for the config route's spread, `prediction/memory_spread.py`)."""
    rows = expressible_rows()
    measured = np.array([float(row["peak_gib"]) for row in rows])
    return np.array([predicted_gib(row) for row in rows]) / measured


def report(rows: list[dict[str, str]]) -> dict[str, Any]:
    measured = np.array([float(row["peak_gib"]) for row in rows])
    sources = np.array([row["source"] for row in rows])
    constant = np.array([np.median(measured[sources != source]) for source in sources])
    ratios = {
        "now": np.array([predicted_gib(row) for row in rows]) / measured,
        "previous": np.array([predicted_gib(row, _previous) for row in rows]) / measured,
        "constant": constant / measured,
    }
    groups = {str(source): sources == source for source in sorted(set(sources))}
    groups["pooled"] = np.ones(len(rows), dtype=bool)
    return {group: {name: scores(r[mask]) for name, r in ratios.items()} for group, mask in groups.items()}


def ablation(rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """Pooled scores with each of this step's terms left out alone, over the rows it changes."""
    measured = np.array([float(row["peak_gib"]) for row in rows])
    now = np.array([predicted_gib(row) for row in rows])
    result = {}
    for name, leave_out in WITHOUT.items():
        without = np.array([predicted_gib(row, leave_out) for row in rows])
        changed = without != now
        result[name] = {**scores(without / measured), "changed": int(changed.sum())}
    return result


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
    print("| source | rows | now: median | min–max | under 0.9 | previous: median | min–max | under 0.9 "
          "| constant: median | min–max | under 0.9 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for group, by_name in result.items():
        cells = " | ".join(_cells(by_name[name]) for name in ("now", "previous", "constant"))
        print(f"| {group} | {by_name['now']['rows']} | {cells} |")
    left_out = ablation(rows)
    print("\n| left out | rows it changes | pooled median | min–max | under 0.9 |\n|---|---|---|---|---|")
    for name, s in left_out.items():
        print(f"| {name} | {s['changed']} | {_cells(s)} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        numbers = {"skipped": skipped, "scores": result, "left_out": left_out}
        args.out.write_text(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()
