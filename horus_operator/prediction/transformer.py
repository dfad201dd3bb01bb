"""Transformer training jobs described by their Hugging Face `config.json`: counted, not exported.

Fine-tuning a Llama / Mistral / Qwen2-style decoder, GPT-2 or BERT is described by its config, a
sequence length, an optimizer and optionally LoRA and gradient checkpointing. From those this module
counts, with no torch and no graph, what `graph_profile.profile_onnx` would count on the graph Hugging Face
exports in eager mode (`attn_implementation="eager"`, as `hack/gen_catalog.py --from-torch` exports the
catalog's transformers), node for node (`transformer_graph` lists the nodes of each module). The
catalog's exported graphs check it (tests/unit/prediction/test_transformer.py): every profile entry
equal.

Beside the profile it gives what a graph cannot say and the memory model reads (`features.MEMORY_NAMES`):
the bytes of the weights as loaded (half precision or QLoRA's NF4, `weightsDtype`), of trainable
parameters and the gradients held of them (all, or one parameter's under optimizer-in-backward), of
the optimizer's state (torch's, or bitsandbytes' 8-bit and paged ones), of the activations kept for
backward (under gradient checkpointing, LoRA, SDPA attention, which stores no T×T scores, or activation
offloading), and of the loss over the vocabulary (held at FP32, for a chunk of the tokens at a time
under a chunked loss). A job sharded over several GPUs (FSDP, ZeRO-2) has these as one GPU holds them.
The profile stays the eager graph's whatever the attention.

Pure: a config is a mapping, nothing is read or downloaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.api.defaults import (
    ATTENTION,
    ATTENTIONS,
    LOSS_CHUNKS,
    OPTIMIZER,
    SHARDING,
    SHARDINGS,
    WEIGHTS_DTYPES,
)
from horus_operator.prediction import features
from horus_operator.prediction import transformer_graph as tg
from horus_operator.prediction.transformer_graph import Shape

INDEX_BYTES = 8  # token ids are int64
LOSS_FP32_COPIES = 2  # the logits cast to FP32 and their log-softmax (under fp32 the cast is a no-op: 1)


@dataclass(frozen=True)
class OptimizerState:
    """What an optimizer keeps per trained parameter: `states` values of `value_bytes` each; None: in the
    parameter's own dtype (torch.optim allocates its state `zeros_like` the parameter). `step_copies`:
    values per parameter, in its dtype, its step allocates for a moment: torch's Adam and AdamW run
    `foreach` on CUDA unless asked otherwise (`_default_to_fused_or_foreach`), and `_multi_tensor_adam`
    takes the square root of every second moment into a new list before the update (one copy of the
    parameters); fused kernels and bitsandbytes' step each tensor in place."""

    states: int
    value_bytes: float | None = None
    step_copies: int = 0


# bitsandbytes' 8-bit optimizers keep each state value in 1 byte, quantised block-wise with one FP32
# absmax per block of 256 values (`Optimizer2State.init_state`: `blocks = n // 256 + bool(n % 256)`;
# the paper's 2,048 was the first release's). Parameters under 4,096 values (`min_8bit_size`) keep FP32
# state: a few norm scales, not counted.
EIGHT_BIT_BYTES = 1 + tg.FP32 / 256
# Per optimizer name (defaults.OPTIMIZERS): Adam's two moments, SGD's momentum. The paged variants keep
# the same state in CUDA unified memory, which the driver may move to host memory when the GPU runs
# short: counted as the device holds it when nothing presses it, as the unpaged variant. bitsandbytes'
# 32-bit state is FP32 whatever the parameters' dtype.
OPTIMIZER_STATES: Mapping[str, OptimizerState] = {
    "adam": OptimizerState(2, step_copies=1),
    "adamw": OptimizerState(2, step_copies=1),
    "sgd": OptimizerState(1),
    "adamw8bit": OptimizerState(2, EIGHT_BIT_BYTES),
    "paged_adamw": OptimizerState(2, tg.FP32),
    "paged_adamw8bit": OptimizerState(2, EIGHT_BIT_BYTES),
    "adamw_fused": OptimizerState(2),  # torch's AdamW(fused=True)
}
# What PEFT's LoraConfig adapts when target_modules is not given (its per-model-type defaults).
DEFAULT_LORA_TARGETS: Mapping[str, tuple[str, ...]] = {
    "decoder": ("q_proj", "v_proj"),
    "gpt2": ("c_attn",),
    "bert": ("query", "value"),
}
ALL_LINEAR = "all-linear"  # PEFT's name for every linear layer but the output head (LM head, classifier)
# Bytes per value of each weightsDtype (defaults.WEIGHTS_DTYPES). nf4: QLoRA's; what it leaves
# unquantised (embeddings, norms, the LM head, biases) and its adapters are bf16, as torchtune's QLoRA
# and bitsandbytes' 4-bit loading (compute dtype bf16) keep them.
DTYPE_BYTES: Mapping[str, int] = {"bf16": 2, "fp16": 2, "fp32": tg.FP32, "nf4": 2}
FP32 = "fp32"
NF4 = "nf4"
# Bytes per NF4 weight with double quantisation (QLoRA, Dettmers et al. 2023, §3; bitsandbytes'
# `bnb_4bit_use_double_quant` and torchao's NF4Tensor alike): 4 bits, one absmax per block of 64
# weights quantised to 8 bits, and one FP32 constant per 256 of those blocks.
NF4_BYTES = 0.5 + 1 / 64 + tg.FP32 / (64 * 256)
HALF_BYTES = 2  # an NF4 weight is dequantised to bf16 for its matmul
# Layers FSDP holds unsharded at once: the one computing and the next one, prefetched (FSDP's default
# BackwardPrefetch.BACKWARD_PRE, and FSDP2's implicit prefetching, gather the next layer's parameters
# before the current one is done).
GATHERED_LAYERS = 2
# Per-layer activation sets on the GPU under activation offloading (torchtune's OffloadActivations):
# the one in use and the one being copied back on a second stream; the rest wait in host memory.
OFFLOADED_ON_DEVICE = 2
# A config.json's torch_dtype naming a half precision, as the weightsDtype it loads in by default.
_HALF_TORCH_DTYPES: Mapping[str, str] = {"bfloat16": "bf16", "float16": "fp16"}


class ConfigError(ValueError):
    """A config or training setting this module cannot count; `key` names it as the DLJob's
    spec.model.huggingface does (`config.hidden_size`, `lora.targetModules`, `sequenceLength`)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key


@dataclass(frozen=True)
class Lora:
    rank: int
    target_modules: tuple[str, ...] = ()  # empty: PEFT's default for the model type
    dropout: float = 0.0  # on each adapter's input (PEFT's lora_dropout; its default, and torchtune's, 0)


@dataclass(frozen=True)
class Sharding:
    """How a job on `gpus` GPUs splits its model's state: "fsdp" (PyTorch's FULL_SHARD, ZeRO-3:
    parameters, gradients and optimizer state) or "zero2" (SHARD_GRAD_OP, ZeRO-2: gradients and
    optimizer state only); "none", or one GPU, holds everything on every GPU."""

    kind: str = SHARDING
    gpus: int = 1

    @property
    def splits(self) -> bool:
        """Whether each GPU holds less than the whole model's state."""
        return self.kind != SHARDING and self.gpus > 1


FSDP = "fsdp"


def shard_over(kind: str, gpus: int) -> Sharding:
    """`kind` of sharding over a job's `gpus`; a job that shards nothing (no sharding, or one GPU) gets
    the default, so its description and key are what they were before sharding could be said."""
    sharding = Sharding(kind, gpus)
    return sharding if sharding.splits else Sharding()


@dataclass(frozen=True)
class Training:
    """How the model is trained: what changes the counts besides the architecture."""

    sequence_length: int
    optimizer: str = OPTIMIZER
    lora: Lora | None = None
    gradient_checkpointing: bool = False
    weights_dtype: str | None = None  # None: the config's torch_dtype where half, else fp32
    attention: str = ATTENTION  # "sdpa" or "eager" (defaults.ATTENTIONS)
    # torchtune's optimizer_in_bwd: each parameter is stepped, and its gradient freed, as soon as it is
    # accumulated in backward
    optimizer_in_backward: bool = False
    loss_chunks: int = LOSS_CHUNKS  # the loss computed over this many chunks of the tokens, one at a time
    activation_offloading: bool = False  # torchtune's: kept activations wait in host memory
    sharding: Sharding = Sharding()
    # Micro-batches whose gradients are summed before each optimizer step, and whether FSDP reduces
    # them after every micro-batch (torchtune's recipes; Accelerate's `sync_each_batch`) or accumulates
    # them unsharded until the last (FSDP's `no_sync()`, as Lightning Fabric's `no_backward_sync` and
    # litgpt use it: every GPU then holds the whole model's gradients).
    gradient_accumulation_steps: int = 1
    sync_each_batch: bool = False

    @property
    def accumulates_unsharded(self) -> bool:
        """Whether one GPU holds every trained parameter's gradient whole, sharding or not."""
        return self.gradient_accumulation_steps > 1 and not self.sync_each_batch


# ---- reading a config ----

_DECODER_TYPES = frozenset({"llama", "mistral", "qwen2"})


def read_shape(config: Mapping[str, Any]) -> Shape:
    """The architecture of a Hugging Face config.json; ConfigError naming the key that is missing or
    wrong, or `model_type` when the architecture is not one this module counts."""
    model_type: object = config.get("model_type") or ("gpt2" if "n_embd" in config else None)
    if not isinstance(model_type, str):
        raise ConfigError(
            "config.model_type", f"a string naming the architecture is required, got {model_type!r}"
        )
    if model_type in _DECODER_TYPES:
        return _decoder_shape(config, qkv_bias=model_type == "qwen2")
    if model_type in _LEARNED_KEYS:
        return _learned_shape(config, model_type)
    supported = ", ".join(sorted([*_DECODER_TYPES, "gpt2", "bert"]))
    raise ConfigError("config.model_type", f"{model_type!r} is not a supported architecture ({supported})")


# No dimension of a trainable model comes near this; beyond it counts would overflow a float.
MAX_DIMENSION = 1 << 32


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DIMENSION:
        raise ConfigError(f"config.{key}", f"an integer from 1 to {MAX_DIMENSION} is required, got {value!r}")
    return value


def _split(hidden: int, heads: int, key: str = "num_attention_heads") -> int:
    if hidden % heads:
        raise ConfigError(f"config.{key}", f"{heads} heads do not divide the width {hidden}")
    return hidden // heads


def _decoder_shape(config: Mapping[str, Any], *, qkv_bias: bool) -> Shape:
    hidden, heads = _int(config, "hidden_size"), _int(config, "num_attention_heads")
    kv_heads = _int(config, "num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigError(
            "config.num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}"
        )
    attention_bias = bool(config.get("attention_bias", False))
    return Shape(
        family="decoder",
        hidden=hidden,
        layers=_int(config, "num_hidden_layers"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=_int(config, "head_dim") if config.get("head_dim") is not None else _split(hidden, heads),
        intermediate=_int(config, "intermediate_size"),
        vocab=_int(config, "vocab_size"),
        positions=0,
        tied=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias or attention_bias,
        out_bias=attention_bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
    )


# Config keys and Hugging Face's defaults (GPT2Config, BertConfig) of the two learned-position families:
# (width, layers, heads, vocabulary, positions).
_LEARNED_KEYS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "gpt2": (("n_embd", 768), ("n_layer", 12), ("n_head", 12), ("vocab_size", 50257), ("n_positions", 1024)),
    "bert": (
        ("hidden_size", 768),
        ("num_hidden_layers", 12),
        ("num_attention_heads", 12),
        ("vocab_size", 30522),
        ("max_position_embeddings", 512),
    ),
}


def _learned_shape(config: Mapping[str, Any], family: str) -> Shape:
    hidden, layers, heads, vocab, positions = (_int(config, *key) for key in _LEARNED_KEYS[family])
    if family == "gpt2":  # n_inner null means 4 × n_embd
        intermediate = _int(config, "n_inner") if config.get("n_inner") is not None else 4 * hidden
    else:
        intermediate = _int(config, "intermediate_size", 3072)
    return Shape(
        family=family,
        labels=_labels(config) if family == "bert" else 0,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads,
        head_dim=_split(hidden, heads, _LEARNED_KEYS[family][2][0]),
        intermediate=intermediate,
        vocab=vocab,
        positions=positions,
        tied=bool(config.get("tie_word_embeddings", True)),
        type_vocab=_int(config, "type_vocab_size", 2) if family == "bert" else 0,
    )


SEQUENCE_CLASSIFICATION = "BertForSequenceClassification"


def _labels(config: Mapping[str, Any]) -> int:
    """A BERT config's number of labels where its `architectures` name a sequence classifier
    (`num_labels`, else the size of `id2label`, else Hugging Face's default 2); 0: the MLM head."""
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or SEQUENCE_CLASSIFICATION not in architectures:
        return 0
    if config.get("num_labels") is not None:
        return _int(config, "num_labels")
    id2label = config.get("id2label")
    return len(id2label) if isinstance(id2label, Mapping) and id2label else 2


# ---- counting ----


@dataclass(frozen=True)
class Description:
    """A transformer training job counted from its config."""

    shape: Shape
    training: Training
    params: int  # every parameter the GPU holds (LoRA's adapters included)
    trainable_params: int  # those with gradients and optimizer state
    # features.PROFILE_NAMES, and the features.MEMORY_NAMES that differ from what a graph implies
    profile: Mapping[str, float]
    key: str = ""  # identifies the config and training setup (a digest), for caching predictions
    weights_dtype: str = FP32  # what the weights are loaded in (`weights_dtype`)

    @property
    def flops_per_token(self) -> float:
        """Forward FLOPs per token (multiply-add = 2): matmuls, attention and the elementwise rest."""
        return self.profile["flops_per_sample"] / self.training.sequence_length


def describe(config: Mapping[str, Any], training: Training) -> Description:
    """Count a training job of the architecture `config` (a Hugging Face config.json) describes;
    ConfigError naming the config key or training setting it cannot take."""
    shape = read_shape(config)
    _check_training(shape, training)
    targets = _lora_targets(shape, training.lora)
    s = training.sequence_length
    rank = training.lora.rank if training.lora is not None else None
    dropout = training.lora.dropout if training.lora is not None else 0.0
    blocks = tg.FAMILIES[shape.family](shape, s, lambda: tg.Builder(s, rank, targets, dropout))
    # (block, times it occurs): the layer is counted once and multiplied, never repeated in memory
    weighted = ((blocks[0], 1), (blocks[1], shape.layers), (blocks[2], 1))
    base = sum(times * _base_params(block, shape) for block, times in weighted)
    adapters = sum(times * _adapter_params(block, training.lora, targets) for block, times in weighted)
    trainable = adapters if training.lora is not None else base
    dtype = weights_dtype(config, training)
    profile = _tally(weighted)
    profile.update(params=float(base + adapters), param_bytes=float(tg.FP32 * (base + adapters)))
    profile["input_bytes_per_sample"] = float(INDEX_BYTES * s)
    profile.update(_held_bytes(blocks, shape, training, targets, dtype))
    profile["fp32_activation_bytes_per_sample"] = _loss_bytes(shape, training)
    kept = _kept_bytes(blocks, shape, training)
    if kept != profile["activation_bytes_per_sample"]:  # memory reads the graph's where they agree
        profile["kept_activation_bytes_per_sample"] = kept
    key = _digest(config, training)
    return Description(shape, training, base + adapters, trainable, profile, key=key, weights_dtype=dtype)


def weights_dtype(config: Mapping[str, Any], training: Training) -> str:
    """The dtype the weights are loaded in: the training's, else the config's `torch_dtype` where it is
    a half precision (Llama, Mistral and Qwen2 publish bfloat16 or float16, and the common fine-tuning
    recipes load them so), else FP32 (what a model is loaded in when no dtype is asked for)."""
    if training.weights_dtype is not None:
        return training.weights_dtype
    return _HALF_TORCH_DTYPES.get(str(config.get("torch_dtype")), FP32)


# The Training fields a job was keyed by before the memory-saving settings came (issue 45); those that
# came later enter the key only where set, so a job's key (what its learned corrections are filed
# under) stays what it was.
_FIRST_FIELDS = frozenset(
    {"sequence_length", "optimizer", "lora", "gradient_checkpointing", "weights_dtype", "attention"}
)


def _digest(config: Mapping[str, Any], training: Training) -> str:
    unset = {field.name: field.default for field in dataclasses.fields(training)}
    settings = {
        name: value
        for name, value in dataclasses.asdict(training).items()
        if name in _FIRST_FIELDS or getattr(training, name) != unset[name]
    }
    if training.lora is not None and not training.lora.dropout:  # as the key was before dropout was said
        settings["lora"] = {"rank": training.lora.rank, "target_modules": training.lora.target_modules}
    text = json.dumps([config, settings], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_training(shape: Shape, training: Training) -> None:
    if not 1 <= training.sequence_length <= MAX_DIMENSION:
        raise ConfigError("sequenceLength", f"from 1 to {MAX_DIMENSION}, got {training.sequence_length}")
    if shape.positions and training.sequence_length > shape.positions:
        raise ConfigError(
            "sequenceLength",
            f"{training.sequence_length} tokens exceed the {shape.positions} learned positions of the config",
        )
    if training.optimizer not in OPTIMIZER_STATES:
        raise ConfigError(
            "optimizer", f"{training.optimizer!r}: expected one of {', '.join(OPTIMIZER_STATES)}"
        )
    if training.lora is not None and not 1 <= training.lora.rank <= MAX_DIMENSION:
        raise ConfigError("lora.rank", f"from 1 to {MAX_DIMENSION}, got {training.lora.rank}")
    if training.lora is not None and not 0 <= training.lora.dropout < 1:
        raise ConfigError("lora.dropout", f"a probability from 0 to under 1, got {training.lora.dropout}")
    if training.weights_dtype is not None and training.weights_dtype not in WEIGHTS_DTYPES:
        raise ConfigError(
            "weightsDtype", f"{training.weights_dtype!r}: expected one of {', '.join(WEIGHTS_DTYPES)}"
        )
    if training.weights_dtype == NF4 and training.lora is None:
        raise ConfigError("weightsDtype", "nf4 is a frozen 4-bit base (QLoRA): it trains LoRA adapters only")
    if training.attention not in ATTENTIONS:
        raise ConfigError("attention", f"{training.attention!r}: expected one of {', '.join(ATTENTIONS)}")
    _check_memory_savings(training)


def _check_memory_savings(training: Training) -> None:
    if not 1 <= training.loss_chunks <= MAX_DIMENSION:
        raise ConfigError("lossChunks", f"from 1 to {MAX_DIMENSION}, got {training.loss_chunks}")
    if training.sharding.kind not in SHARDINGS:
        raise ConfigError("sharding", f"{training.sharding.kind!r}: expected one of {', '.join(SHARDINGS)}")
    if not 1 <= training.sharding.gpus <= MAX_DIMENSION:
        raise ConfigError("sharding", f"over 1 to {MAX_DIMENSION} GPUs, got {training.sharding.gpus}")
    steps = training.gradient_accumulation_steps
    if not 1 <= steps <= MAX_DIMENSION:
        raise ConfigError("gradientAccumulationSteps", f"from 1 to {MAX_DIMENSION}, got {steps}")
    if training.optimizer_in_backward and steps > 1:
        # torchtune refuses the two together: a gradient stepped and freed cannot be summed with the next
        raise ConfigError(
            "gradientAccumulationSteps", "1 under optimizerInBackward, which frees each gradient"
        )


def _lora_targets(shape: Shape, lora: Lora | None) -> frozenset[str]:
    """The linear layers LoRA adapts, by module name as PEFT matches them."""
    if lora is None:
        return frozenset()
    names = _linear_names(shape)
    wanted = lora.target_modules or DEFAULT_LORA_TARGETS[shape.family]
    if ALL_LINEAR in wanted:
        return frozenset(names - {tg.LM_HEAD, tg.CLASSIFIER})
    unknown = sorted(set(wanted) - names)
    if unknown:
        raise ConfigError(
            "lora.targetModules", f"{', '.join(unknown)}: no such linear layer ({', '.join(sorted(names))})"
        )
    return frozenset(wanted)


def _linear_names(shape: Shape) -> set[str]:
    blocks = tg.FAMILIES[shape.family](shape, 1, lambda: tg.Builder(1, None, frozenset()))
    return {linear.name for block in blocks for linear in block.linears}


def _base_params(block: tg.Block, shape: Shape) -> int:
    total = block.other_params
    for linear in block.linears:
        weight = 0 if linear.name == tg.LM_HEAD and shape.tied else linear.fan_in * linear.fan_out
        total += weight + (linear.fan_out if linear.bias else 0)
    return total


def _adapter_params(block: tg.Block, lora: Lora | None, targets: frozenset[str]) -> int:
    if lora is None:
        return 0
    return sum(
        lora.rank * (linear.fan_in + linear.fan_out) for linear in block.linears if linear.name in targets
    )


@dataclass(frozen=True)
class _Part:
    """One block of the model (prologue, a layer, epilogue) as memory holds it."""

    weight_bytes: float  # its weights as loaded
    trained: int  # values of its trained parameters


@dataclass(frozen=True)
class _Held:
    """What one GPU holds of the model's state, in bytes."""

    weights: float
    gradients: float
    optimizer: float


def _held_bytes(
    blocks: tg.Blocks, shape: Shape, training: Training, targets: frozenset[str], dtype: str
) -> dict[str, float]:
    """The memory terms of the model's state (features.MEMORY_NAMES) as one GPU holds them. Trained
    parameters keep their gradients and the optimizer's state in their own dtype: FP32, or the half
    precision the whole model is loaded in (torchtune's convention, adapters included; bf16 beside an
    NF4 base). Where they are what the graph implies (FP32 weights, every gradient held) they are left
    out, and memory derives them as it does for any job."""
    width = DTYPE_BYTES[dtype]
    parts = tuple(
        _part(block, shape, training.lora, targets, dtype, quantised=index == 1)
        for index, block in enumerate(blocks)
    )
    trained = parts[0].trained + shape.layers * parts[1].trained + parts[2].trained
    if training.optimizer_in_backward:  # each gradient freed as soon as its parameter is stepped
        gradients = width * _largest_trained(blocks, shape, training.lora, targets)
    else:
        gradients = width * trained
    held = _Held(
        weights=parts[0].weight_bytes + shape.layers * parts[1].weight_bytes + parts[2].weight_bytes,
        gradients=gradients,
        optimizer=_optimizer_bytes(training.optimizer, width) * trained,
    )
    if training.sharding.splits:
        held = _shard(held, parts, shape, training, width)
    terms = {"trainable_param_bytes": float(width * trained), "optimizer_state_bytes": held.optimizer}
    step_copies = OPTIMIZER_STATES[training.optimizer].step_copies
    if step_copies and not training.optimizer_in_backward:  # in backward: one parameter at a time
        terms["optimizer_step_bytes"] = step_copies * width * trained / _stepped_by(training.sharding)
    if dtype != FP32 or training.sharding.splits:  # not the FP32 weights and autocast copies memory derives
        terms["weight_bytes"] = held.weights + _dequantised_bytes(blocks[1], dtype)
    if held.gradients != terms["trainable_param_bytes"]:
        terms["gradient_bytes"] = held.gradients
    return terms


def _part(
    block: tg.Block, shape: Shape, lora: Lora | None, targets: frozenset[str], dtype: str, *, quantised: bool
) -> _Part:
    """The block's weights at the dtype's width, but under nf4 the weights of a repeated layer's linear
    layers in NF4 (torchtune's QLoRA quantises every linear layer of each decoder layer; bitsandbytes'
    4-bit loading every one but the LM head); and its trained parameters: the adapters, or all."""
    base, adapters = _base_params(block, shape), _adapter_params(block, lora, targets)
    weight_bytes = float(DTYPE_BYTES[dtype] * (base + adapters))
    if dtype == NF4 and quantised:
        weight_bytes -= (DTYPE_BYTES[dtype] - NF4_BYTES) * _linear_weights(block)
    return _Part(weight_bytes, adapters if lora is not None else base)


def _linear_weights(block: tg.Block) -> int:
    return sum(linear.fan_in * linear.fan_out for linear in block.linears)


def _dequantised_bytes(layer: tg.Block, dtype: str) -> float:
    """An NF4 weight is dequantised to bf16 for its matmul, in forward and again in backward, one linear
    layer at a time (torchao's `linear_nf4`, bitsandbytes' `MatMul4Bit`): the largest one, transiently."""
    if dtype != NF4:
        return 0.0
    return float(HALF_BYTES * max(linear.fan_in * linear.fan_out for linear in layer.linears))


def _largest_trained(blocks: tg.Blocks, shape: Shape, lora: Lora | None, targets: frozenset[str]) -> int:
    """The values of the largest trained parameter: all optimizer-in-backward holds a gradient of at
    once (torchtune steps each parameter in a hook after its gradient is accumulated, and frees it).
    LoRA's: an adapter matrix (rank × in, or out × rank); else the largest weight (the token embedding
    or a linear layer's)."""
    linears = [linear for block in blocks for linear in block.linears]
    if lora is not None:
        adapted = (linear for linear in linears if linear.name in targets)
        return max(lora.rank * max(linear.fan_in, linear.fan_out) for linear in adapted)
    return max(shape.vocab * shape.hidden, *(linear.fan_in * linear.fan_out for linear in linears))


def _optimizer_bytes(optimizer: str, width: int) -> float:
    """Bytes of optimizer state per trained parameter value held in `width` bytes."""
    state = OPTIMIZER_STATES[optimizer]
    return state.states * (width if state.value_bytes is None else state.value_bytes)


def _stepped_by(sharding: Sharding) -> int:
    """GPUs the optimizer's step is split over: each steps its shard of the state (ZeRO-2 and FSDP)."""
    return sharding.gpus if sharding.splits else 1


def _shard(held: _Held, parts: tuple[_Part, ...], shape: Shape, training: Training, width: int) -> _Held:
    """What one of `sharding.gpus` GPUs holds: its share of what is sharded, and what is gathered whole
    at a time. FSDP (ZeRO-3) shards the parameters too and all-gathers each unit for its forward and
    backward: the root unit (embeddings, final norm, head), gathered through both, and GATHERED_LAYERS
    layers. Under either kind a unit's gradients are whole until reduce-scattered: the root's and one
    layer's (never more than every gradient whole, as in a model of one layer); accumulated unsharded
    (`Training.accumulates_unsharded`: FSDP's `no_sync()`, under FULL_SHARD or SHARD_GRAD_OP), all of
    them."""
    start, layer, end = parts
    sharding = training.sharding
    gpus = sharding.gpus
    weights, gradients = held.weights, held.gradients
    if sharding.kind == FSDP:
        gathered = min(shape.layers, GATHERED_LAYERS) * layer.weight_bytes
        weights = held.weights / gpus + start.weight_bytes + end.weight_bytes + gathered
    if not training.accumulates_unsharded:
        unreduced = width * (start.trained + layer.trained + end.trained)
        every = width * (start.trained + shape.layers * layer.trained + end.trained)
        gradients = min(held.gradients / gpus + unreduced, every)
    return _Held(weights, gradients, held.optimizer / gpus)


def _loss_bytes(shape: Shape, training: Training) -> float:
    """The loss over the vocabulary, not in a forward graph: Hugging Face's (and torchtune's) cast the
    logits to FP32 (`logits.float()`) and log-softmax them, at any precision. Computed in chunks of the
    tokens (torchtune's CEWithChunkedOutputLoss, compiled as it recommends: each chunk is upcast and its
    cross-entropy taken, and backward recomputes it), only one chunk's are held at a time. A sequence
    classifier's loss is over its labels, once per sequence."""
    if shape.labels:
        return float(LOSS_FP32_COPIES * tg.FP32 * shape.labels)
    tokens = math.ceil(training.sequence_length / training.loss_chunks)
    return float(LOSS_FP32_COPIES * tg.FP32 * tokens * shape.vocab)


def _tally(weighted: Iterable[tuple[tg.Block, int]]) -> dict[str, float]:
    """The profile entries counted from the nodes of each block × its occurrences, by `features`' rules."""
    counts = dict.fromkeys(features.PROFILE_NAMES, 0.0)
    for block, times in weighted:
        for node in block.nodes:
            count = times * node.count
            counts[f"{node.category}_ops"] += count
            counts["flops_per_sample"] += count * node.flops
            if node.category in ("linear", "attention"):
                counts[f"{node.category}_flops_per_sample"] += count * node.flops
        counts["activation_bytes_per_sample"] += times * tg.activation_bytes(block)
    return counts


def _kept_bytes(blocks: tg.Blocks, shape: Shape, training: Training) -> float:
    """Activation bytes held for backward, attention stored as `training.attention` stores it. Under
    gradient checkpointing (Hugging Face's, one checkpoint per layer): the inputs of layers 2…L (the
    outputs of the layers before them; the first layer's input is the embeddings' output, counted with
    them), and one layer's activations while it is recomputed for its backward; the embeddings and the
    head are not checkpointed. Without it, every layer's."""
    start, layer, end = (tg.activation_bytes(b, kept_only=True, attention=training.attention) for b in blocks)
    if not training.gradient_checkpointing:
        return start + _on_device(shape.layers, training) * layer + end
    inputs = _on_device(shape.layers - 1, training) * training.sequence_length * shape.hidden * tg.FP32
    return start + inputs + layer + end


def _on_device(count: int, training: Training) -> int:
    """How many of `count` per-layer activation sets (a layer's, or a checkpointed layer's input) are on
    the GPU: all, or under activation offloading (torchtune's OffloadActivations, which moves each saved
    tensor to host memory and brings it back ahead of its backward) OFFLOADED_ON_DEVICE."""
    return min(count, OFFLOADED_ON_DEVICE) if training.activation_offloading else count
