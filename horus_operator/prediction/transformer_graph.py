"""The ONNX nodes a Hugging Face transformer's eager export holds, listed from its dimensions.

`transformer.describe` counts them: each entry below is one module's nodes (a linear layer's weight
transpose, MatMul and bias Add; RMSNorm's seven elementwise steps; eager attention's scores, scale,
mask and softmax; LoRA's adapters) with their category, FLOPs and output size, in the categories and
under the counting rules of `features`. The lists follow the graphs `hack/gen_catalog.py --from-torch`
exports (transformers, `attn_implementation="eager"`): the catalog's exported transformers are
matched entry for entry (tests/unit/prediction/test_transformer.py). Beside what eager attention
stores, each attention node says what SDPA stores in its place (`Nodes.sdpa_out`), for memory only.

Pure: dimensions in, node lists out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

FP32 = 4  # bytes per value: the graph's dtype, as the catalog's exports
BOOL_BYTES = 1
# A dropout's outputs per value, in FP32 graph values: the dropped value and its mask (what
# `torch.native_dropout` returns and backward keeps). Memory scales kept activations by the precision's
# width (half under amp/bf16), but the mask is a one-byte bool at any precision: counted at two graph
# bytes, it is its one byte under half precision and two, on the safe side, under FP32.
DROPOUT_VALUES = 1 + 2 * BOOL_BYTES / FP32
LM_HEAD = "lm_head"
CLASSIFIER = "classifier"  # BertForSequenceClassification's output layer


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
    # BERT's head: 0 for the MLM head (BertForMaskedLM); the number of labels of a sequence
    # classification head (BertForSequenceClassification: the pooler and a classifier on [CLS]).
    labels: int = 0


@dataclass(frozen=True)
class Nodes:
    """`count` ONNX nodes of one category, each with these FLOPs and output values (one sample)."""

    category: str  # a *_ops prefix of features.PROFILE_NAMES ("other": layout nodes, no output kept)
    count: int
    flops: float = 0.0
    out: float = 0.0
    itemsize: int = FP32
    # Whether backward needs the output, so memory holds it. A graph cannot say; the graph-like profile
    # counts every output (features' proxy), memory only these where the description knows better.
    kept: bool = True
    # What SDPA (PyTorch's fused attention, flash or memory-efficient, Hugging Face's default) stores in
    # place of this eager attention node's output; None: the same as eager. The fused kernel never
    # materialises the T×T scores, their scaling, mask or softmax; it keeps one logsumexp per query row
    # and head for its backward (and the output, which eager keeps too).
    sdpa_out: float | None = None


@dataclass(frozen=True)
class Linear:
    """A linear layer by its module name (what LoRA's target_modules match)."""

    name: str
    fan_in: int
    fan_out: int
    bias: bool


@dataclass(frozen=True)
class Block:
    """One part of the model (the prologue, one layer, the epilogue): its nodes and linear layers, and
    its parameters outside them (embeddings, norm scales and shifts)."""

    nodes: tuple[Nodes, ...]
    linears: tuple[Linear, ...]
    other_params: int = 0


class Builder:
    """Collects a block's nodes; a linear layer adds its nodes, and LoRA's where it is a target."""

    def __init__(self, tokens: int, rank: int | None, targets: frozenset[str], dropout: float = 0.0) -> None:
        """`rank`: LoRA's, adapting the linear layers named in `targets`; None without LoRA. `dropout`:
        the probability of LoRA's dropout on each adapter's input (0: none)."""
        self.tokens, self.rank, self.targets, self.dropout = tokens, rank, targets, dropout
        self.nodes: list[Nodes] = []
        self.linears: list[Linear] = []
        self.other_params = 0

    def add(self, *nodes: Nodes) -> None:
        self.nodes.extend(nodes)

    def linear(self, name: str, fan_in: int, fan_out: int, *, bias: bool = False, gemm: bool = False) -> None:
        s = self.tokens
        self.linears.append(Linear(name, fan_in, fan_out, bias))
        if gemm:  # GPT-2's Conv1D is addmm: 2-D views around a Gemm that adds the bias itself
            self.add(Nodes("other", 2), Nodes("linear", 1, 2.0 * s * fan_in * fan_out, s * fan_out))
        else:  # nn.Linear: the weight's transpose, MatMul, then the bias as an Add
            self.add(Nodes("other", 1), Nodes("linear", 1, 2.0 * s * fan_in * fan_out, s * fan_out))
            if bias:
                self.add(Nodes("elementwise", 1, s * fan_out, s * fan_out))
        if self.rank is not None and name in self.targets:
            rank = self.rank  # x·Aᵀ·Bᵀ × scaling, added to the frozen layer's output
            if self.dropout > 0:  # A multiplies dropout(x): each adapter keeps its own copy and mask
                self.add(Nodes("elementwise", 1, s * fan_in, DROPOUT_VALUES * s * fan_in))
            # Backward needs x·Aᵀ (for B's gradient); B's output is only scaled and added, which keep nothing.
            self.add(
                Nodes("other", 2),
                Nodes("linear", 1, 2.0 * s * fan_in * rank, s * rank),
                Nodes("linear", 1, 2.0 * s * rank * fan_out, s * fan_out, kept=False),
                Nodes("elementwise", 2, s * fan_out, s * fan_out, kept=False),
            )

    def block(self) -> Block:
        return Block(tuple(self.nodes), tuple(self.linears), self.other_params)


def _elementwise(count: int, values: float, flops: float | None = None) -> Nodes:
    return Nodes("elementwise", count, values if flops is None else flops, values)


def _layer_norm(s: int, width: int) -> Nodes:
    return Nodes("norm", 1, 2.0 * s * width, s * width)


def _rms_norm(s: int, width: int) -> tuple[Nodes, ...]:
    """Llama's RMSNorm as eager PyTorch runs it: x² → mean → + ε → √ → 1/· → x·r → ·w."""
    return (
        _elementwise(1, s * width),
        _elementwise(1, s, flops=s * width),
        _elementwise(3, s),
        _elementwise(2, s * width),
    )


def _causal_mask(s: int) -> tuple[Nodes, ...]:
    """The eager causal mask: a ≤ comparison, two ANDs and an equality (booleans), a Where to floats."""
    return (
        Nodes("other", 1),
        Nodes("elementwise", 3, s * s, s * s, BOOL_BYTES),
        _elementwise(1, s * s),
    )


def _attention(s: int, heads: int, head_dim: int, *, merge_nodes: int) -> tuple[Nodes, ...]:
    """Kᵀ, Q·Kᵀ, × scale, + mask, softmax, P·V, then the heads merged back (eager attention computes
    every score, masked ones included: no causal saving)."""
    scores = heads * s * s
    matmul = 2.0 * heads * s * s * head_dim
    return (
        Nodes("other", 1),
        Nodes("attention", 1, matmul, scores, sdpa_out=heads * s),  # SDPA: the logsumexp
        Nodes("elementwise", 2, scores, scores, sdpa_out=0.0),
        Nodes("activation", 1, scores, scores, sdpa_out=0.0),
        Nodes("attention", 1, matmul, heads * s * head_dim),
        Nodes("other", merge_nodes),
    )


def _rotary(values: int) -> tuple[Nodes, ...]:
    """Rotary positions on q or k: x·cos + rotate_half(x)·sin, rotate_half as two slices, −, concat."""
    return (_elementwise(1, values), Nodes("other", 3), _elementwise(1, values / 2), _elementwise(2, values))


Blocks = tuple[Block, Block, Block]  # prologue, one layer (repeated), epilogue
NewBuilder = Callable[[], Builder]


def _decoder_blocks(shape: Shape, s: int, new: NewBuilder) -> Blocks:
    h, i = shape.hidden, shape.intermediate
    q_width, kv_width = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    start = new()
    start.other_params = shape.vocab * shape.hidden
    start.add(Nodes("embedding", 1, 0.0, s * h), *_causal_mask(s))
    # the rotary tables: positions × inverse frequencies, duplicated, cos and sin
    head = shape.head_dim
    start.add(_elementwise(1, s * head / 2), Nodes("other", 3), _elementwise(2, s * head))
    layer = new()
    layer.other_params = 2 * h  # two RMSNorm scales
    layer.add(*_rms_norm(s, h))
    for name, width in (("q_proj", q_width), ("k_proj", kv_width), ("v_proj", kv_width)):
        layer.linear(name, h, width, bias=shape.qkv_bias)
    layer.add(Nodes("other", 6), *_rotary(s * q_width), *_rotary(s * kv_width))
    if shape.kv_heads < shape.heads:  # repeat_kv: k and v expanded to every query head
        layer.add(Nodes("other", 6))
    layer.add(*_attention(s, shape.heads, shape.head_dim, merge_nodes=2))
    layer.linear("o_proj", q_width, h, bias=shape.out_bias)
    layer.add(_elementwise(1, s * h), *_rms_norm(s, h))
    layer.linear("gate_proj", h, i, bias=shape.mlp_bias)
    layer.add(Nodes("activation", 1, s * i, s * i), _elementwise(1, s * i))  # SiLU: x·σ(x)
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
    start.add(Nodes("other", 1), Nodes("embedding", 2, 0.0, s * h), _elementwise(1, s * h), *_causal_mask(s))
    layer = new()
    layer.other_params = 4 * h  # two LayerNorms
    layer.add(_layer_norm(s, h))
    layer.linear("c_attn", h, 3 * h, bias=True, gemm=True)
    layer.add(Nodes("other", 6))  # split into q, k, v; into heads
    layer.add(*_attention(s, shape.heads, shape.head_dim, merge_nodes=1))
    layer.linear("c_proj", h, h, bias=True, gemm=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    layer.linear("c_fc", h, i, bias=True, gemm=True)
    # gelu_new: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    layer.add(_elementwise(5, s * i), Nodes("activation", 1, s * i, s * i), _elementwise(2, s * i))
    layer.linear("c_proj", i, h, bias=True, gemm=True)
    layer.add(_elementwise(1, s * h))
    end = new()
    end.other_params = 2 * h
    end.add(_layer_norm(s, h), Nodes("other", 1))
    end.linear(LM_HEAD, h, shape.vocab)
    return start.block(), layer.block(), end.block()


def _bert_blocks(shape: Shape, s: int, new: NewBuilder) -> Blocks:
    h, i = shape.hidden, shape.intermediate
    start = new()
    start.other_params = (shape.vocab + shape.positions + shape.type_vocab) * h + 2 * h
    embedding = Nodes("embedding", 1, 0.0, s * h)
    start.add(
        Nodes("other", 1), embedding, embedding, _elementwise(1, s * h), embedding, _elementwise(1, s * h)
    )
    start.add(_layer_norm(s, h), _elementwise(1, s * s))  # the padding mask as floats
    layer = new()
    layer.other_params = 4 * h  # two LayerNorms
    for name in ("query", "key", "value"):
        layer.linear(name, h, h, bias=True)
    layer.add(Nodes("other", 5), *_attention(s, shape.heads, shape.head_dim, merge_nodes=2))
    layer.linear("dense", h, h, bias=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    layer.linear("dense", h, i, bias=True)
    layer.add(Nodes("activation", 1, s * i, s * i))
    layer.linear("dense", i, h, bias=True)
    layer.add(_elementwise(1, s * h), _layer_norm(s, h))
    if shape.labels:
        return start.block(), layer.block(), _bert_classifier(shape, new)
    end = new()  # the MLM head: transform (dense, GELU, LayerNorm), then the tied decoder with a bias
    end.other_params = 2 * h
    end.linear("dense", h, h, bias=True)
    end.add(Nodes("activation", 1, s * h, s * h), _layer_norm(s, h))
    end.linear(LM_HEAD, h, shape.vocab, bias=True)
    return start.block(), layer.block(), end.block()


def _bert_classifier(shape: Shape, new: NewBuilder) -> Block:
    """BertForSequenceClassification's head: the [CLS] token taken (a Gather), the pooler (dense,
    tanh) and the classifier (dense to the labels), on one token; no logits over the vocabulary."""
    h = shape.hidden
    template = new()
    end = Builder(1, template.rank, template.targets, template.dropout)
    end.add(Nodes("other", 1))
    end.linear("dense", h, h, bias=True)
    end.add(Nodes("activation", 1, h, h))
    end.linear(CLASSIFIER, h, shape.labels, bias=True)
    return end.block()


FAMILIES: Mapping[str, Callable[[Shape, int, NewBuilder], Blocks]] = {
    "decoder": _decoder_blocks,
    "gpt2": _gpt2_blocks,
    "bert": _bert_blocks,
}


EAGER = "eager"


def activation_bytes(block: Block, *, kept_only: bool = False, attention: str = EAGER) -> float:
    """Bytes of the block's node outputs for one sample: all of them (the profile's graph-like count),
    or only those backward needs (`kept_only`: what memory holds), with attention stored as eager
    attention stores it (the exported graph's) or, for any other `attention`, as SDPA does."""
    return sum(
        node.count * _stored(node, attention) * node.itemsize
        for node in block.nodes
        if node.category != "other" and (node.kept or not kept_only)
    )


def _stored(node: Nodes, attention: str) -> float:
    return node.out if attention == EAGER or node.sdpa_out is None else node.sdpa_out
