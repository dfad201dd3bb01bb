"""Transformer training jobs described by their Hugging Face `config.json`: counted, not exported.

Fine-tuning a Llama / Mistral / Qwen2-style decoder, GPT-2 or BERT is described by its config, a
sequence length, an optimizer and optionally LoRA and gradient checkpointing. From those this module
counts, with no torch and no graph, what `features.profile_onnx` would count on the graph Hugging Face
exports in eager mode (`attn_implementation="eager"`, as `hack/gen_catalog.py --from-torch` exports the
catalog's transformers), node for node: each block below lists the ONNX nodes of one module with their
category, FLOPs and output size, under the same counting rules (docs/prediction.md). The catalog's
exported graphs check it (tests/unit/prediction/test_transformer.py): parameters exact, FLOPs within
0.1 %.

Beside the profile it gives what a graph cannot say and the memory model reads (`features.MEMORY_NAMES`):
the bytes of trainable parameters (their gradients), of the optimizer's state, and of the activations
kept for backward under gradient checkpointing.

Pure: a config is a mapping, nothing is read or downloaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from horus_operator.prediction import features

FP32 = 4  # bytes per value: the graph's dtype, as the catalog's exports
INDEX_BYTES = 8  # token ids are int64
BOOL_BYTES = 1
# FP32 values the optimizer keeps per trainable parameter (Adam: two moments; SGD: momentum).
OPTIMIZER_STATES: Mapping[str, int] = {"adam": 2, "adamw": 2, "sgd": 1}
DEFAULT_OPTIMIZER = "adam"
# What PEFT's LoraConfig adapts when target_modules is not given (its per-model-type defaults).
DEFAULT_LORA_TARGETS: Mapping[str, tuple[str, ...]] = {
    "decoder": ("q_proj", "v_proj"),
    "gpt2": ("c_attn",),
    "bert": ("query", "value"),
}
ALL_LINEAR = "all-linear"  # PEFT's name for every linear layer but the output head
LM_HEAD = "lm_head"


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


@dataclass(frozen=True)
class Training:
    """How the model is trained: what changes the counts besides the architecture."""

    sequence_length: int
    optimizer: str = DEFAULT_OPTIMIZER
    lora: Lora | None = None
    gradient_checkpointing: bool = False


@dataclass(frozen=True)
class Shape:
    """The dimensions of a supported architecture, read from its config."""

    family: str  # "decoder" (Llama, Mistral, Qwen2), "gpt2" or "bert"
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    positions: int  # learned position embeddings (0: rotary, any length)
    tied: bool  # LM head shares the token embedding
    qkv_bias: bool = False
    out_bias: bool = False  # o_proj
    mlp_bias: bool = False
    type_vocab: int = 0  # BERT's token-type embeddings


@dataclass(frozen=True)
class _Nodes:
    """`count` ONNX nodes of one category, each with these FLOPs and output values (one sample)."""

    category: str  # a *_ops prefix of features.PROFILE_NAMES ("other": layout nodes, no output kept)
    count: int
    flops: float = 0.0
    out: float = 0.0
    itemsize: int = FP32
    # Whether backward needs the output, so memory holds it. A graph cannot say; the graph-like profile
    # counts every output (features' proxy), memory only these where the description knows better.
    kept: bool = True


@dataclass(frozen=True)
class _Linear:
    """A linear layer by its module name (what LoRA's target_modules match)."""

    name: str
    fan_in: int
    fan_out: int
    bias: bool


# ---- reading a config ----

_DECODER_TYPES = frozenset({"llama", "mistral", "qwen2"})


def read_shape(config: Mapping[str, Any]) -> Shape:
    """The architecture of a Hugging Face config.json; ConfigError naming the key that is missing or
    wrong, or `model_type` when the architecture is not one this module counts."""
    model_type = config.get("model_type") or ("gpt2" if "n_embd" in config else None)
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


# ---- the nodes of one sample ----


@dataclass(frozen=True)
class _Block:
    """One part of the model (the prologue, one layer, the epilogue): its nodes and linear layers, and
    its parameters outside them (embeddings, norm scales and shifts)."""

    nodes: tuple[_Nodes, ...]
    linears: tuple[_Linear, ...]
    other_params: int = 0


class _Builder:
    """Collects a block's nodes; a linear layer adds its nodes, and LoRA's where it is a target."""

    def __init__(self, tokens: int, lora: Lora | None, targets: frozenset[str]) -> None:
        self.tokens, self.lora, self.targets = tokens, lora, targets
        self.nodes: list[_Nodes] = []
        self.linears: list[_Linear] = []
        self.other_params = 0

    def add(self, *nodes: _Nodes) -> None:
        self.nodes.extend(nodes)

    def linear(self, name: str, fan_in: int, fan_out: int, *, bias: bool = False, gemm: bool = False) -> None:
        s = self.tokens
        self.linears.append(_Linear(name, fan_in, fan_out, bias))
        if gemm:  # GPT-2's Conv1D is addmm: 2-D views around a Gemm that adds the bias itself
            self.add(_Nodes("other", 2), _Nodes("linear", 1, 2.0 * s * fan_in * fan_out, s * fan_out))
        else:  # nn.Linear: the weight's transpose, MatMul, then the bias as an Add
            self.add(_Nodes("other", 1), _Nodes("linear", 1, 2.0 * s * fan_in * fan_out, s * fan_out))
            if bias:
                self.add(_Nodes("elementwise", 1, s * fan_out, s * fan_out))
        if self.lora is not None and name in self.targets:
            rank = self.lora.rank  # x·Aᵀ·Bᵀ × scaling, added to the frozen layer's output
            # Backward needs x·Aᵀ (for B's gradient); B's output is only scaled and added, which keep nothing.
            self.add(
                _Nodes("other", 2),
                _Nodes("linear", 1, 2.0 * s * fan_in * rank, s * rank),
                _Nodes("linear", 1, 2.0 * s * rank * fan_out, s * fan_out, kept=False),
                _Nodes("elementwise", 2, s * fan_out, s * fan_out, kept=False),
            )

    def block(self) -> _Block:
        return _Block(tuple(self.nodes), tuple(self.linears), self.other_params)


def _elementwise(count: int, values: float, flops: float | None = None) -> _Nodes:
    return _Nodes("elementwise", count, values if flops is None else flops, values)


def _layer_norm(s: int, width: int) -> _Nodes:
    return _Nodes("norm", 1, 2.0 * s * width, s * width)


def _rms_norm(s: int, width: int) -> tuple[_Nodes, ...]:
    """Llama's RMSNorm as eager PyTorch runs it: x² → mean → + ε → √ → 1/· → x·r → ·w."""
    return (
        _elementwise(1, s * width),
        _elementwise(1, s, flops=s * width),
        _elementwise(3, s),
        _elementwise(2, s * width),
    )


def _causal_mask(s: int) -> tuple[_Nodes, ...]:
    """The eager causal mask: a ≤ comparison, two ANDs and an equality (booleans), a Where to floats."""
    return (
        _Nodes("other", 1),
        _Nodes("elementwise", 3, s * s, s * s, BOOL_BYTES),
        _elementwise(1, s * s),
    )


def _attention(s: int, heads: int, head_dim: int, *, merge_nodes: int) -> tuple[_Nodes, ...]:
    """Kᵀ, Q·Kᵀ, × scale, + mask, softmax, P·V, then the heads merged back (eager attention computes
    every score, masked ones included: no causal saving)."""
    scores = heads * s * s
    matmul = 2.0 * heads * s * s * head_dim
    return (
        _Nodes("other", 1),
        _Nodes("attention", 1, matmul, scores),
        _elementwise(2, scores),
        _Nodes("activation", 1, scores, scores),
        _Nodes("attention", 1, matmul, heads * s * head_dim),
        _Nodes("other", merge_nodes),
    )


def _rotary(values: int) -> tuple[_Nodes, ...]:
    """Rotary positions on q or k: x·cos + rotate_half(x)·sin, rotate_half as two slices, −, concat."""
    return (_elementwise(1, values), _Nodes("other", 3), _elementwise(1, values / 2), _elementwise(2, values))


Blocks = tuple[_Block, _Block, _Block]  # prologue, one layer (repeated), epilogue
NewBuilder = Callable[[], _Builder]


def _decoder_blocks(shape: Shape, s: int, new: NewBuilder) -> Blocks:
    h, i = shape.hidden, shape.intermediate
    q_width, kv_width = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    start = new()
    start.other_params = shape.vocab * shape.hidden
    start.add(_Nodes("embedding", 1, 0.0, s * h), *_causal_mask(s))
    # the rotary tables: positions × inverse frequencies, duplicated, cos and sin
    head = shape.head_dim
    start.add(_elementwise(1, s * head / 2), _Nodes("other", 3), _elementwise(2, s * head))
    layer = new()
    layer.other_params = 2 * h  # two RMSNorm scales
    layer.add(*_rms_norm(s, h))
    for name, width in (("q_proj", q_width), ("k_proj", kv_width), ("v_proj", kv_width)):
        layer.linear(name, h, width, bias=shape.qkv_bias)
    layer.add(_Nodes("other", 6), *_rotary(s * q_width), *_rotary(s * kv_width))
    if shape.kv_heads < shape.heads:  # repeat_kv: k and v expanded to every query head
        layer.add(_Nodes("other", 6))
    layer.add(*_attention(s, shape.heads, shape.head_dim, merge_nodes=2))
    layer.linear("o_proj", q_width, h, bias=shape.out_bias)
    layer.add(_elementwise(1, s * h), *_rms_norm(s, h))
    layer.linear("gate_proj", h, i, bias=shape.mlp_bias)
    layer.add(_Nodes("activation", 1, s * i, s * i), _elementwise(1, s * i))  # SiLU: x·σ(x)
    layer.linear("up_proj", h, i, bias=shape.mlp_bias)
    layer.add(_elementwise(1, s * i))
    layer.linear("down_proj", i, h, bias=shape.mlp_bias)
    layer.add(_elementwise(1, s * h))
    end = new()
    end.other_params = h
    end.add(*_rms_norm(s, h))
    end.linear(LM_HEAD, h, shape.vocab)
    return start.block(), layer.block(), end.block()


def _gpt2_blocks(shape: Shape, s: int, new: NewBuilder) -> Blocks:
    h, i = shape.hidden, shape.intermediate
    start = new()
    start.other_params = (shape.vocab + shape.positions) * h
    start.add(
        _Nodes("other", 1), _Nodes("embedding", 2, 0.0, s * h), _elementwise(1, s * h), *_causal_mask(s)
    )
    layer = new()
    layer.other_params = 4 * h  # two LayerNorms
    layer.add(_layer_norm(s, h))
    layer.linear("c_attn", h, 3 * h, bias=True, gemm=True)
    layer.add(_Nodes("other", 6))  # split into q, k, v; into heads
    layer.add(*_attention(s, shape.heads, shape.head_dim, merge_nodes=1))
    layer.linear("c_proj", h, h, bias=True, gemm=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    layer.linear("c_fc", h, i, bias=True, gemm=True)
    # gelu_new: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    layer.add(_elementwise(5, s * i), _Nodes("activation", 1, s * i, s * i), _elementwise(2, s * i))
    layer.linear("c_proj", i, h, bias=True, gemm=True)
    layer.add(_elementwise(1, s * h))
    end = new()
    end.other_params = 2 * h
    end.add(_layer_norm(s, h), _Nodes("other", 1))
    end.linear(LM_HEAD, h, shape.vocab)
    return start.block(), layer.block(), end.block()


def _bert_blocks(shape: Shape, s: int, new: NewBuilder) -> Blocks:
    h, i = shape.hidden, shape.intermediate
    start = new()
    start.other_params = (shape.vocab + shape.positions + shape.type_vocab) * h + 2 * h
    embedding = _Nodes("embedding", 1, 0.0, s * h)
    start.add(
        _Nodes("other", 1), embedding, embedding, _elementwise(1, s * h), embedding, _elementwise(1, s * h)
    )
    start.add(_layer_norm(s, h), _elementwise(1, s * s))  # the padding mask as floats
    layer = new()
    layer.other_params = 4 * h  # two LayerNorms
    for name in ("query", "key", "value"):
        layer.linear(name, h, h, bias=True)
    layer.add(_Nodes("other", 5), *_attention(s, shape.heads, shape.head_dim, merge_nodes=2))
    layer.linear("dense", h, h, bias=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    layer.linear("dense", h, i, bias=True)
    layer.add(_Nodes("activation", 1, s * i, s * i))
    layer.linear("dense", i, h, bias=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    end = new()  # the MLM head: transform (dense, GELU, LayerNorm), then the tied decoder with a bias
    end.other_params = 2 * h
    end.linear("dense", h, h, bias=True)
    end.add(_Nodes("activation", 1, s * h, s * h), _layer_norm(s, h))
    end.linear(LM_HEAD, h, shape.vocab, bias=True)
    return start.block(), layer.block(), end.block()


_FAMILIES: Mapping[str, Callable[[Shape, int, NewBuilder], Blocks]] = {
    "decoder": _decoder_blocks,
    "gpt2": _gpt2_blocks,
    "bert": _bert_blocks,
}


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
    blocks = _FAMILIES[shape.family](shape, s, lambda: _Builder(s, training.lora, targets))
    # (block, times it occurs): the layer is counted once and multiplied, never repeated in memory
    weighted = ((blocks[0], 1), (blocks[1], shape.layers), (blocks[2], 1))
    base = sum(times * _base_params(block, shape) for block, times in weighted)
    adapters = sum(times * _adapter_params(block, training.lora, targets) for block, times in weighted)
    trainable = adapters if training.lora is not None else base
    profile = _tally(weighted)
    profile.update(params=float(base + adapters), param_bytes=float(FP32 * (base + adapters)))
    profile["input_bytes_per_sample"] = float(INDEX_BYTES * s)
    profile["trainable_param_bytes"] = float(FP32 * trainable)
    profile["optimizer_state_bytes"] = float(FP32 * OPTIMIZER_STATES[training.optimizer] * trainable)
    if training.gradient_checkpointing:
        profile["kept_activation_bytes_per_sample"] = _checkpointed_bytes(blocks, shape, s)
    elif training.lora is not None:
        profile["kept_activation_bytes_per_sample"] = sum(
            times * _activation_bytes(block, kept_only=True) for block, times in weighted
        )
    return Description(shape, training, base + adapters, trainable, profile, key=_digest(config, training))


def _digest(config: Mapping[str, Any], training: Training) -> str:
    text = json.dumps([config, dataclasses.asdict(training)], sort_keys=True, default=str)
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


def _lora_targets(shape: Shape, lora: Lora | None) -> frozenset[str]:
    """The linear layers LoRA adapts, by module name as PEFT matches them."""
    if lora is None:
        return frozenset()
    names = _linear_names(shape)
    wanted = lora.target_modules or DEFAULT_LORA_TARGETS[shape.family]
    if ALL_LINEAR in wanted:
        return frozenset(names - {LM_HEAD})
    unknown = sorted(set(wanted) - names)
    if unknown:
        raise ConfigError(
            "lora.targetModules", f"{', '.join(unknown)}: no such linear layer ({', '.join(sorted(names))})"
        )
    return frozenset(wanted)


def _linear_names(shape: Shape) -> set[str]:
    blocks = _FAMILIES[shape.family](shape, 1, lambda: _Builder(1, None, frozenset()))
    return {linear.name for block in blocks for linear in block.linears}


def _base_params(block: _Block, shape: Shape) -> int:
    total = block.other_params
    for linear in block.linears:
        weight = 0 if linear.name == LM_HEAD and shape.tied else linear.fan_in * linear.fan_out
        total += weight + (linear.fan_out if linear.bias else 0)
    return total


def _adapter_params(block: _Block, lora: Lora | None, targets: frozenset[str]) -> int:
    if lora is None:
        return 0
    return sum(
        lora.rank * (linear.fan_in + linear.fan_out) for linear in block.linears if linear.name in targets
    )


def _tally(weighted: Iterable[tuple[_Block, int]]) -> dict[str, float]:
    """The profile entries counted from the nodes of each block × its occurrences, by `features`' rules."""
    counts = dict.fromkeys(features.PROFILE_NAMES, 0.0)
    for block, times in weighted:
        for node in block.nodes:
            count = times * node.count
            counts[f"{node.category}_ops"] += count
            counts["flops_per_sample"] += count * node.flops
            if node.category in ("linear", "attention"):
                counts[f"{node.category}_flops_per_sample"] += count * node.flops
        counts["activation_bytes_per_sample"] += times * _activation_bytes(block)
    return counts


def _activation_bytes(block: _Block, *, kept_only: bool = False) -> float:
    return sum(
        node.count * node.out * node.itemsize
        for node in block.nodes
        if node.category != "other" and (node.kept or not kept_only)
    )


def _checkpointed_bytes(blocks: Blocks, shape: Shape, s: int) -> float:
    """Activation bytes kept under gradient checkpointing (Hugging Face's, one checkpoint per layer):
    the inputs of layers 2…L (the outputs of the layers before them; the first layer's input is the
    embeddings' output, counted with them), and one layer's activations while it is recomputed for its
    backward; the embeddings and the head are not checkpointed."""
    start, layer, end = (_activation_bytes(block, kept_only=True) for block in blocks)
    inputs = (shape.layers - 1) * s * shape.hidden * FP32
    return start + inputs + layer + end
