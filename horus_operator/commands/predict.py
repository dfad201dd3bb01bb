"""`horus predict pairs|job` and `horus train utilization|slowdown`."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from horus_operator.api.defaults import (
    ATTENTION,
    ATTENTIONS,
    DEFAULT_FRAMEWORK,
    DEFAULT_PRECISION,
    LOSS_CHUNKS,
    OPTIMIZER,
    OPTIMIZERS,
    SHARDING,
    SHARDINGS,
    WEIGHTS_DTYPES,
)
from horus_operator.prediction import catalog, load_predictor, memory, timeslicing, transformer
from horus_operator.prediction.api import UnknownGpuError, UnknownModelError, Workload
from horus_operator.prediction.gpus import PRECISIONS, normalize_gpu
from horus_operator.prediction.reshape import ShapeError

PAIR_INPUT_COLUMNS = ("gpu", "model_a", "batch_a", "model_b", "batch_b")
PAIR_OUTPUT_COLUMNS = (*PAIR_INPUT_COLUMNS, "slowdown_a", "slowdown_b", "feasible")
# Optional input columns (a missing column or an empty cell is fp32), repeated after the output columns
# when the input has them.
PAIR_PRECISION_COLUMNS = ("precision_a", "precision_b")
# Optional likewise: the framework each job trains with (a missing column or an empty cell is pytorch).
PAIR_FRAMEWORK_COLUMNS = ("framework_a", "framework_b")
# Optional: CPU cores each job keeps busy beside its training loop (what its pod may use beyond one core;
# a missing column or an empty cell is 0), for the slowdown prior's host term; repeated likewise.
PAIR_HOST_CPU_COLUMNS = ("host_cpus_a", "host_cpus_b")
# Optional: each job's GPU busy fraction alone (0-1) as measured (nvidia-smi's utilization, or the node
# agent's), used in place of the graph's; the names of `horus simulate --truth`'s columns, so a truth file
# can be read as it is. A missing column or an empty cell is predicted; repeated likewise.
PAIR_UTILIZATION_COLUMNS = ("util_a_alone", "util_b_alone")

models_option = click.option(
    "--models",
    "models_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Directory of trained models (from `horus train`); default: the shipped ones.",
)


@click.group()
def predict() -> None:
    """Predict GPU utilization, memory and co-location slowdown from model graphs (no profiling)."""


# ---- pairs ----


def _batch_size(text: str, row: int, column: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise click.ClickException(f"row {row}: {column} {text!r} is not a positive integer")
    return value


def _choice(record: dict[str, str], row: int, column: str, choices: Sequence[str], default: str) -> str:
    value = record.get(column) or default
    if value not in choices:
        raise click.ClickException(f"row {row}: {column} {value!r} is not one of {', '.join(choices)}")
    return value


def _host_cpus(record: dict[str, str], row: int, column: str) -> float:
    text = record.get(column) or "0"
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise click.ClickException(f"row {row}: {column} {text!r} is not a number of cores >= 0")
    return value


def _utilization(record: dict[str, str], row: int, column: str) -> float | None:
    text = record.get(column) or ""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise click.ClickException(f"row {row}: {column} {text!r} is not a busy fraction between 0 and 1")
    return value


def _parse_pair(record: dict[str, str], row: int) -> tuple[str, Workload, Workload]:
    """(gpu, a, b) of one input row; ClickException naming the row and the bad value."""
    try:
        gpu = normalize_gpu(record["gpu"])
    except UnknownGpuError as error:
        raise click.ClickException(f"row {row}: gpu {record['gpu']!r}: {error}") from error
    workloads = []
    for side in ("a", "b"):
        name = record[f"model_{side}"]
        try:
            model = catalog.canonical(name)
        except UnknownModelError as error:
            raise click.ClickException(f"row {row}: model_{side} {name!r}: {error}") from error
        workloads.append(
            Workload(
                model=model,
                batch_size=_batch_size(record[f"batch_{side}"], row, f"batch_{side}"),
                precision=_choice(record, row, f"precision_{side}", PRECISIONS, DEFAULT_PRECISION),
                framework=_choice(record, row, f"framework_{side}", memory.RUNTIMES, DEFAULT_FRAMEWORK),
                host_cpus=_host_cpus(record, row, f"host_cpus_{side}"),
                busy=_utilization(record, row, f"util_{side}_alone"),
            )
        )
    return gpu, workloads[0], workloads[1]


def _read_pairs(path: Path) -> tuple[list[dict[str, str]], tuple[str, ...]]:
    """The rows, and which of the optional columns (precision, framework, host CPUs, utilization) the
    header has."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle, skipinitialspace=True)
        header = [name.strip() for name in reader.fieldnames or []]
        missing = [column for column in PAIR_INPUT_COLUMNS if column not in header]
        if missing:
            raise click.ClickException(f"{path}: missing column(s) {', '.join(missing)}")
        reader.fieldnames = header
        records = [{key: (value or "").strip() for key, value in record.items() if key} for record in reader]
    optional = (
        *PAIR_PRECISION_COLUMNS,
        *PAIR_FRAMEWORK_COLUMNS,
        *PAIR_HOST_CPU_COLUMNS,
        *PAIR_UTILIZATION_COLUMNS,
    )
    return records, tuple(column for column in optional if column in header)


def _write_atomically(path: Path, rows: Sequence[Sequence[object]]) -> None:
    """Write the CSV next to `path` and rename it into place: no partial output on failure."""
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@predict.command()
@click.option(
    "--input", "input_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--output", "output_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--time-sliced",
    is_flag=True,
    help="The two jobs time-slice the GPU (no MPS; the operator's default for env-bound jobs): each "
    "slowdown at least the job's busy fraction over its fair share of the GPU's time, and a job given "
    "util_*_alone that asks no more than its share at most the time-sharing prior's answer.",
)
@models_option
def pairs(input_path: Path, output_path: Path, time_sliced: bool, models_dir: Path | None) -> None:
    """Slowdown of both jobs of each pair sharing one GPU, and whether they fit in its memory.

    INPUT columns: gpu,model_a,batch_a,model_b,batch_b, and optionally precision_a,precision_b
    (fp32, amp or bf16; a missing column or an empty cell is fp32), framework_a,framework_b (pytorch or
    tensorflow; empty is pytorch), host_cpus_a,host_cpus_b (CPU cores each job keeps busy beside its
    training loop, e.g. data-loader workers; empty is 0) and util_a_alone,util_b_alone (each job's
    measured GPU utilization alone, 0-1, in place of the graph's; empty is predicted). OUTPUT repeats the
    five and adds slowdown_a,slowdown_b,feasible, then the optional columns the input had. Rows are
    numbered from 1 after the header.
    """
    records, optional_columns = _read_pairs(input_path)
    requests = [_parse_pair(record, row) for row, record in enumerate(records, start=1)]
    predictor = load_predictor(models_dir)
    predictions = predictor.pairs(requests)
    rows: list[Sequence[object]] = [(*PAIR_OUTPUT_COLUMNS, *optional_columns)]
    for record, (gpu, a, b), prediction in zip(records, requests, predictions, strict=True):
        slowdowns: tuple[float, ...] = (prediction.slowdown_a, prediction.slowdown_b)
        if time_sliced:
            slowdowns = timeslicing.within_fair_shares(predictor, gpu, (a, b), slowdowns)
        used = {
            "precision_a": a.precision,
            "precision_b": b.precision,
            "framework_a": a.framework,
            "framework_b": b.framework,
            "host_cpus_a": f"{a.host_cpus:g}",
            "host_cpus_b": f"{b.host_cpus:g}",
            "util_a_alone": "" if a.busy is None else f"{a.busy:g}",
            "util_b_alone": "" if b.busy is None else f"{b.busy:g}",
        }
        rows.append(
            [record[column] for column in PAIR_INPUT_COLUMNS]
            + [f"{slowdowns[0]:.4f}", f"{slowdowns[1]:.4f}", str(prediction.feasible).lower()]
            + [used[column] for column in optional_columns]
        )
    _write_atomically(output_path, rows)
    click.echo(f"{len(predictions)} pairs -> {output_path}", err=True)


# ---- job ----


def _choice_option(name: str, choices: Sequence[str], default: str, help_text: str) -> Any:
    """A `job` option taking one of `choices`, its default shown."""
    return click.option(name, type=click.Choice(choices), default=default, show_default=True, help=help_text)


@predict.command()
@click.option("--model", help="Catalog model name, e.g. resnet50.")
@click.option(
    "--input-shape",
    help="Per-sample input of --model, e.g. 3x32x32 (CIFAR-10) or 128 (tokens); default its own.",
)
@click.option(
    "--hf-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A Hugging Face config.json (Llama, Mistral, Qwen2, GPT-2, BERT) instead of --model.",
)
@click.option("--sequence-length", type=click.IntRange(min=1), help="Tokens per sample (with --hf-config).")
@click.option("--lora-rank", type=click.IntRange(min=1), help="Fine-tune LoRA adapters of this rank only.")
@click.option(
    "--lora-target", "lora_targets", multiple=True, help="Module LoRA adapts (repeatable; default: PEFT's)."
)
@click.option(
    "--lora-dropout",
    type=click.FloatRange(min=0, max=1, max_open=True),
    help="Dropout on each adapter's input (with --lora-rank; default 0, PEFT's).",
)
@click.option("--gradient-checkpointing", is_flag=True, help="Recompute each layer in backward.")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=OPTIMIZER, show_default=True)
@click.option(
    "--optimizer-in-backward", is_flag=True, help="Step each parameter in backward and free its gradient."
)
@click.option(
    "--weights-dtype",
    type=click.Choice(WEIGHTS_DTYPES),
    help="Weights loaded in (with --hf-config; nf4: QLoRA, with --lora-rank); default: the config's "
    "torch_dtype where half, else fp32.",
)
@click.option(
    "--loss-chunks",
    type=click.IntRange(min=1),
    default=LOSS_CHUNKS,
    show_default=True,
    help="Chunks of the tokens the loss is computed over one at a time (torchtune's chunked loss: 8).",
)
@click.option("--activation-offloading", is_flag=True, help="Kept activations wait in host memory.")
@_choice_option(
    "--sharding",
    SHARDINGS,
    SHARDING,
    "How the model is split over --gpus (fsdp: parameters, gradients, state; zero2: the last two).",
)
@click.option(
    "--gpus", type=click.IntRange(min=1), default=1, show_default=True, help="GPUs the job trains on."
)
@click.option(
    "--gradient-accumulation-steps",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Micro-batches (each --batch-size) summed before each optimizer step.",
)
@click.option(
    "--sync-each-batch",
    is_flag=True,
    help="Sharded gradients reduced after every micro-batch (torchtune, DeepSpeed), not accumulated "
    "unsharded under FSDP's no_sync() (Lightning Fabric, LitGPT).",
)
@_choice_option(
    "--attention",
    ATTENTIONS,
    ATTENTION,
    "Attention implementation (with --hf-config): sdpa stores no sequence × sequence scores.",
)
@click.option("--batch-size", required=True, type=click.IntRange(min=1))
@click.option(
    "--gpu",
    required=True,
    help="GPU type (e.g. v100, a100, h100) or GPU Feature Discovery product (e.g. NVIDIA-H100-80GB-HBM3).",
)
@_choice_option(
    "--precision", PRECISIONS, DEFAULT_PRECISION, "Arithmetic the job trains in (amp: FP16 autocast)."
)
@_choice_option(
    "--framework",
    memory.RUNTIMES,
    DEFAULT_FRAMEWORK,
    "Framework the job trains with: its allocator sets the memory held beyond the model's own.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@models_option
def job(
    model: str | None,
    input_shape: str | None,
    hf_config: Path | None,
    sequence_length: int | None,
    lora_rank: int | None,
    lora_targets: tuple[str, ...],
    lora_dropout: float | None,
    gradient_checkpointing: bool,
    optimizer: str,
    optimizer_in_backward: bool,
    weights_dtype: str | None,
    loss_chunks: int,
    activation_offloading: bool,
    sharding: str,
    gpus: int,
    gradient_accumulation_steps: int,
    sync_each_batch: bool,
    attention: str,
    batch_size: int,
    gpu: str,
    precision: str,
    framework: str,
    as_json: bool,
    models_dir: Path | None,
) -> None:
    """Predicted mean GPU utilization and peak GPU memory of one job running alone: a catalog model
    (--model) or a transformer described by its Hugging Face config (--hf-config)."""
    if (model is None) == (hf_config is None):
        raise click.UsageError("give exactly one of --model and --hf-config")
    if input_shape is not None and model is None:
        raise click.UsageError("--input-shape goes with --model (--hf-config takes --sequence-length)")
    described: transformer.Description | None = None
    try:
        gpu_type = normalize_gpu(gpu)
        if hf_config is not None:
            lora = _lora(lora_rank, lora_targets, lora_dropout)
            if sequence_length is None:
                raise click.UsageError("--hf-config needs --sequence-length")
            training = transformer.Training(
                sequence_length,
                optimizer,
                lora,
                gradient_checkpointing,
                weights_dtype,
                attention,
                optimizer_in_backward,
                loss_chunks,
                activation_offloading,
                transformer.shard_over(sharding, gpus),
                gradient_accumulation_steps,
                sync_each_batch,
            )
            described = transformer.describe(_read_config(hf_config), training)
            name = f"{hf_config.name} ({described.shape.family})"
            workload = Workload(name, batch_size, dict(described.profile), "hf:" + described.key, precision)
        else:
            name = catalog.canonical(model or "")
            workload = _catalog_workload(name, _shape(input_shape), batch_size, precision)
        workload = dataclasses.replace(workload, framework=framework)
        prediction = load_predictor(models_dir).job(workload, gpu_type)
    except (UnknownGpuError, UnknownModelError, transformer.ConfigError) as error:
        raise click.ClickException(str(error)) from error
    result = {
        "model": name,
        "batch_size": batch_size,
        "gpu": gpu_type,
        "precision": precision,
        "framework": framework,
        "utilization": round(prediction.utilization, 4),
        "memory_mib": round(prediction.memory_mib, 1),
        **(_described(described) if described is not None else {}),
        **({"input_shape": list(_shape(input_shape) or ())} if input_shape is not None else {}),
    }
    if as_json:
        click.echo(json.dumps(result))
        return
    trained_in = precision if framework == DEFAULT_FRAMEWORK else f"{precision}, {framework}"
    click.echo(f"{name} batch {batch_size} ({trained_in}) on {gpu_type}:")
    click.echo(f"  GPU utilization  {100 * prediction.utilization:5.1f} %")
    click.echo(f"  GPU memory       {prediction.memory_mib:7.0f} MiB")
    if described is not None:
        click.echo(f"  parameters       {described.params:,} ({described.trainable_params:,} trained)")
        click.echo(f"  forward FLOPs    {described.flops_per_token:,.0f} per token")


def _shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(size) for size in text.lower().split("x"))
    except ValueError as error:
        raise click.UsageError(f"--input-shape {text!r}: sizes joined by x, e.g. 3x32x32") from error


def _catalog_workload(name: str, shape: tuple[int, ...] | None, batch_size: int, precision: str) -> Workload:
    """The catalog model, counted again at `shape` where one is given (as spec.model.inputShape is)."""
    if shape is None:
        return Workload(model=name, batch_size=batch_size, precision=precision)
    try:
        return catalog.workload_at_shape(name, shape, batch_size, precision)
    except ShapeError as error:
        raise click.ClickException(f"--input-shape {list(shape)}: {name} cannot take it: {error}") from error


def _lora(
    lora_rank: int | None, lora_targets: tuple[str, ...], lora_dropout: float | None
) -> transformer.Lora | None:
    if (lora_targets or lora_dropout is not None) and lora_rank is None:
        raise click.UsageError("--lora-target and --lora-dropout need --lora-rank")
    if lora_rank is None:
        return None
    return transformer.Lora(lora_rank, tuple(lora_targets), lora_dropout or 0.0)


def _read_config(path: Path) -> dict[str, object]:
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise click.ClickException(f"{path}: not a readable JSON config: {error}") from error
    if not isinstance(config, dict):
        raise click.ClickException(f"{path}: a config.json holds one JSON object")
    return config


def _described(described: transformer.Description) -> dict[str, object]:
    return {
        "sequence_length": described.training.sequence_length,
        "params": described.params,
        "trainable_params": described.trainable_params,
        "weights_dtype": described.weights_dtype,
        "attention": described.training.attention,
        "flops_per_token": round(described.flops_per_token),
    }


# ---- train ----


@click.command()
@click.argument("kind", type=click.Choice(["utilization", "slowdown"]))
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Measurements in the shared data's column format (see docs/prediction.md).",
)
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Models directory."
)
def train(kind: str, data: Path, out: Path) -> None:
    """Retrain a model from your own measurements; use the result with --models OUT.

    `slowdown` also recalibrates the memory model from the pairs' feasibility. Models not retrained
    are taken from the shipped set when OUT is loaded.
    """
    try:  # pandas and xgboost: an optional extra, only for training
        from horus_operator.prediction.training import common, roofline_fit, slowdown_fit
    except ModuleNotFoundError as missing:
        raise click.ClickException(
            f"horus train needs the 'train' extra ({missing.name} is not installed): "
            "pip install 'horus-operator[train]'"
        ) from missing

    try:
        if kind == "slowdown":
            metrics = slowdown_fit.train_slowdown(
                data, out, catalog.lookup, log=lambda line: click.echo(line, err=True)
            )
        else:
            metrics = roofline_fit.train_utilization(
                data, out, catalog.lookup, common.catalog_name, log=lambda line: click.echo(line, err=True)
            )
    except (ValueError, UnknownModelError) as error:
        raise click.ClickException(str(error)) from error
    click.echo(json.dumps(metrics, indent=2))
