"""Graph features of a training job, computed from its ONNX computation graph.

This module turns a graph-only ONNX model (weights may be absent: initializers with external data, or
weights exported as graph inputs), loaded and shape-inferred by `onnx_graph`, into the profile and
features `features` names. It imports `onnx` (about a second): the operator, the agent and the
simulator import it only where a graph is actually read, so they start without it.

How things are counted (see docs/prediction.md, "Features and catalog"):
- FLOPs are forward-pass FLOPs; a multiply-add is 2 FLOPs. Conv: 2·|out|·Cin/g·kH·kW;
  Gemm/MatMul: 2·M·N·K; LSTM/GRU/RNN: 2·T·D·N·(G·H·I + G·H·H) with G gates. Elementwise ops and
  activations 1 FLOP per output element, normalisation 2, pooling one per window element. Biases
  are not counted. A training step costs roughly 3× the forward FLOPs.
- A recurrent layer over T time steps and D directions is unrolled: it adds 2·T·D linear ops (the
  input and the hidden projections of each step), its gate nonlinearities per step to the
  activation ops, 1 recurrent op and T·D recurrent steps; `recurrent_step_ops` counts the linear
  and activation ops so added (the layer runs as one fused library call, so the host dispatches
  them once per layer, not once per step).
- A MatMul whose operands are both activations (e.g. Q·Kᵀ and P·V in self-attention) is an attention
  op, not a linear layer; a fused Attention/MultiHeadAttention node counts as one attention op.
- Activation bytes sum the outputs of compute nodes: a proxy for the memory kept for backward.

Per-sample quantities are counted over the whole graph at its batch size and divided by it;
`features.at_batch` scales the profile to any batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from horus_operator.prediction import onnx_graph
from horus_operator.prediction.features import PROFILE_NAMES, at_batch
from horus_operator.prediction.onnx_graph import Graph, Shape, nbytes, numel

# Profile entries measured over the whole inferred batch and divided by its size.
_PER_SAMPLE_NAMES = tuple(name for name in PROFILE_NAMES if name.endswith("_per_sample"))


def _ops(names: str) -> frozenset[str]:
    return frozenset(names.split())


_CONV = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"})
_MATMUL = frozenset({"Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul"})
_CONV_WEIGHT_INPUT = {"QLinearConv": 3}  # other convolutions take the weight second
_RECURRENT_GATES = {"LSTM": 5, "GRU": 3, "RNN": 1}  # nonlinearities per cell step
_ACTIVATION = _ops(
    """
    Relu LeakyRelu PRelu Sigmoid Tanh Elu Selu Celu Gelu FastGelu BiasGelu Erf HardSigmoid HardSwish
    Softplus Softsign Mish ThresholdedRelu Clip Softmax LogSoftmax QuickGelu
    """
)
_NORM = _ops(
    """
    BatchNormalization InstanceNormalization LayerNormalization GroupNormalization LpNormalization
    MeanVarianceNormalization LRN SkipLayerNormalization SimplifiedLayerNormalization
    RMSNormalization
    """
)
_POOL = frozenset({"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
_FUSED_ATTENTION = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
_ELEMENTWISE = _ops(
    """
    Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal Max Min Sum Mean Sin Cos Floor Ceil Round
    Sign Where Equal Less Greater Not And Or ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd
    ReduceSumSquare ReduceLogSumExp CumSum
    """
)
# Nodes that produce no work on the device worth counting.
_IGNORED = frozenset({"Constant", "ConstantOfShape", "Shape", "Size", "Identity"})
_NORM_FLOPS_PER_ELEMENT = 2  # scale and shift; statistics are a lower-order term
# Categories whose outputs are kept for the backward pass (layout ops mostly alias their input).
_ACTIVATION_CATEGORIES = _ops("conv linear attention recurrent activation norm pool embedding elementwise")


@dataclass
class _Tally:
    counts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROFILE_NAMES, 0.0))

    def add(self, name: str, amount: float) -> None:
        self.counts[name] += amount


def from_onnx(model: bytes | str | Path | onnx.ModelProto, batch_size: int) -> dict[str, float]:
    """Features (keyed by features.FEATURE_NAMES) of an ONNX model trained at `batch_size`.

    The batch dimension may be symbolic (any axis; the one symbolic dimension the data inputs share)
    or fixed (then axis 0 of the first data input). Weights need not be present. Raises ValueError
    on unreadable input or when a non-batch dimension is unknown.
    """
    return at_batch(profile_onnx(model), batch_size)


def profile_onnx(model: bytes | str | Path | onnx.ModelProto) -> dict[str, float]:
    """Batch-independent profile (keyed by PROFILE_NAMES) of an ONNX model."""
    graph = onnx_graph.prepare(onnx_graph.load(model))
    tally = _Tally()
    for node in graph.nodes:
        _count_node(node, graph, tally)
    _count_params(graph, tally)
    tally.add("input_bytes_per_sample", sum(nbytes(graph, name) for name in graph.data_inputs))
    for name in _PER_SAMPLE_NAMES:
        tally.counts[name] /= graph.batch
    return tally.counts


# ---- counting ----


def _count_params(graph: Graph, tally: _Tally) -> None:
    for name in graph.params:
        tally.add("params", numel(graph, name))
        tally.add("param_bytes", nbytes(graph, name))


def _count_node(node: onnx.NodeProto, graph: Graph, tally: _Tally) -> None:
    category, flops = _classify(node, graph)
    if category == "ignored":
        return
    if category == "recurrent":
        _count_recurrent(node, graph, tally)
    else:
        tally.add(f"{category}_ops", 1)
        tally.add("flops_per_sample", flops)
        if category in ("conv", "linear", "attention"):
            tally.add(f"{category}_flops_per_sample", flops)
    if category in _ACTIVATION_CATEGORIES:
        tally.add("activation_bytes_per_sample", sum(nbytes(graph, name) for name in node.output if name))


def _classify(node: onnx.NodeProto, graph: Graph) -> tuple[str, float]:
    """The node's category (a *_ops feature prefix, "recurrent" or "ignored") and its FLOPs."""
    op = node.op_type
    out = numel(graph, node.output[0]) if node.output else 0
    if op in _IGNORED:
        return "ignored", 0.0
    if op in _CONV:
        return "conv", _conv_flops(node, graph)
    if op in _MATMUL:
        is_attention = op == "MatMul" and not any(name in graph.weight_derived for name in node.input[:2])
        return ("attention" if is_attention else "linear"), _matmul_flops(node, graph)
    if op in _RECURRENT_GATES:
        return "recurrent", 0.0
    if op in _FUSED_ATTENTION:
        return "attention", 0.0
    if op == "Gather" and node.input[0] in graph.params:
        return "embedding", 0.0
    if op in _ACTIVATION:
        return "activation", float(out)
    if op in _NORM:
        return "norm", float(out * _NORM_FLOPS_PER_ELEMENT)
    if op in _POOL:
        return "pool", _pool_flops(node, graph)
    if op in _ELEMENTWISE:
        return "elementwise", float(max(out, *(numel(graph, name) for name in node.input if name)))
    return "other", 0.0


def _attribute(node: onnx.NodeProto, name: str, default: object) -> object:
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _conv_flops(node: onnx.NodeProto, graph: Graph) -> float:
    weight = _known_shape(graph, node, node.input[_CONV_WEIGHT_INPUT.get(node.op_type, 1)])
    per_output = math.prod(weight[1:])  # Cin/groups × kernel (Conv); Cout/groups × kernel (ConvTranspose)
    counted = node.input[0] if node.op_type == "ConvTranspose" else node.output[0]
    return 2.0 * math.prod(_known_shape(graph, node, counted)) * per_output


def _matmul_flops(node: onnx.NodeProto, graph: Graph) -> float:
    left = _known_shape(graph, node, node.input[0])
    reduced = left[0] if node.op_type == "Gemm" and _attribute(node, "transA", 0) else left[-1]
    return 2.0 * math.prod(_known_shape(graph, node, node.output[0])) * reduced


def _known_shape(graph: Graph, node: onnx.NodeProto, name: str) -> Shape:
    """The shape of a tensor whose size FLOPs depend on; ValueError when inference left it unknown."""
    shape = graph.shapes.get(name)
    if not shape:
        raise ValueError(
            f"{node.op_type} node {node.name or node.output[0]!r}: shape of {name!r} is unknown after ONNX "
            "shape inference (fix the input shapes or export with static sizes)"
        )
    return shape


def _pool_flops(node: onnx.NodeProto, graph: Graph) -> float:
    if node.op_type.startswith("Global"):
        return float(numel(graph, node.input[0]))
    kernel = _attribute(node, "kernel_shape", [1])
    assert isinstance(kernel, list)  # an ONNX ints attribute
    return float(numel(graph, node.output[0]) * math.prod(kernel))


def _count_recurrent(node: onnx.NodeProto, graph: Graph, tally: _Tally) -> None:
    x_shape, w_shape, r_shape = (_known_shape(graph, node, name) for name in node.input[:3])
    batch_first = _attribute(node, "layout", 0) == 1
    steps, batch = (x_shape[1], x_shape[0]) if batch_first else (x_shape[0], x_shape[1])
    directions, gate_rows, input_size = w_shape
    hidden = r_shape[2]
    flops = 2.0 * steps * directions * batch * gate_rows * (input_size + hidden)
    unrolled = steps * directions
    tally.add("flops_per_sample", flops)
    tally.add("linear_flops_per_sample", flops)
    tally.add("linear_ops", 2 * unrolled)
    tally.add("activation_ops", _RECURRENT_GATES[node.op_type] * unrolled)
    tally.add("recurrent_ops", 1)
    tally.add("recurrent_steps", unrolled)
    tally.add("recurrent_step_ops", (2 + _RECURRENT_GATES[node.op_type]) * unrolled)
