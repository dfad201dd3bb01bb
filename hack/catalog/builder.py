"""Build graph-only ONNX models layer by layer, the way the reference PyTorch modules are written.

Weights are initializers that carry their shape but no data (they point at an external file that
does not exist), so a ResNet-50 costs a few kilobytes. The batch dimension is the symbol "N".
Weight names are `<scope>.<n>` with a counter that restarts whenever a scope is entered, so running
the same module code twice in the same scope reuses its weights (CycleGAN's generators, tied
embeddings): parameters are then counted once and FLOPs once per use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

OPSET = 20  # Gelu is an ONNX op from opset 20
BATCH = "N"


@dataclass(frozen=True)
class Tensor:
    """A tensor under construction: its name, rank and feature size (channels or hidden width)."""

    name: str
    rank: int
    features: int


class GraphBuilder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._nodes: list[onnx.NodeProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._weights: dict[str, onnx.TensorProto] = {}
        self._scope = "model"
        self._weight_counter = 0
        self._tensor_counter = 0

    # ---- plumbing ----

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Weights created inside are named after `name`; re-entering the scope reuses them."""
        outer = (self._scope, self._weight_counter)
        self._scope, self._weight_counter = name, 0
        try:
            yield
        finally:
            self._scope, self._weight_counter = outer

    def input(self, name: str, shape: Sequence[int | str], dtype: int = TensorProto.FLOAT) -> Tensor:
        self._inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        features = shape[-1] if len(shape) != 4 else shape[1]
        return Tensor(name, len(shape), int(features) if isinstance(features, int) else 0)

    def weight(self, shape: Sequence[int]) -> str:
        name = f"{self._scope}.{self._weight_counter}"
        self._weight_counter += 1
        existing = self._weights.get(name)
        if existing is not None:
            if list(existing.dims) != list(shape):
                raise ValueError(f"weight {name} reused with shape {shape}, was {list(existing.dims)}")
            return name
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", "weights-not-shipped.bin"
        self._weights[name] = tensor
        return name

    def constant(self, values: Sequence[float] | Sequence[int], dtype: type = np.int64) -> str:
        """A small constant (shapes, pads, scales): a Constant node, never a parameter."""
        output = self._fresh("const")
        array = np.asarray(values, dtype=dtype)
        self._nodes.append(
            helper.make_node("Constant", [], [output], value=onnx.numpy_helper.from_array(array))
        )
        return output

    def op(self, op_type: str, inputs: Sequence[str], **attributes: object) -> str:
        output = self._fresh(op_type.lower())
        self._nodes.append(helper.make_node(op_type, list(inputs), [output], **attributes))
        return output

    def model(self, outputs: Sequence[Tensor]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self._nodes,
            self.name,
            self._inputs,
            [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, None) for t in outputs],
            initializer=list(self._weights.values()),
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])

    def _fresh(self, stem: str) -> str:
        self._tensor_counter += 1
        return f"{stem}_{self._tensor_counter}"

    # ---- layers (PyTorch semantics) ----

    def conv(
        self,
        x: Tensor,
        out_channels: int,
        kernel: int | tuple[int, int],
        *,
        stride: int = 1,
        padding: int | None = None,
        groups: int = 1,
        bias: bool = False,
        dilation: int = 1,
    ) -> Tensor:
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        pad_h, pad_w = (kh // 2 * dilation, kw // 2 * dilation) if padding is None else (padding, padding)
        inputs = [x.name, self.weight([out_channels, x.features // groups, kh, kw])]
        if bias:
            inputs.append(self.weight([out_channels]))
        output = self.op(
            "Conv",
            inputs,
            kernel_shape=[kh, kw],
            strides=[stride, stride],
            pads=[pad_h, pad_w, pad_h, pad_w],
            group=groups,
            dilations=[dilation, dilation],
        )
        return Tensor(output, 4, out_channels)

    def pointwise_conv1d(self, x: Tensor, out_channels: int) -> Tensor:
        """nn.Conv1d(kernel_size=1) over the features of an [N, S, d] tensor (the old
        attention-is-all-you-need-pytorch feed-forward layer), transposed in and out."""
        channels_first = self.transpose(x, [0, 2, 1])
        weight, bias = self.weight([out_channels, x.features, 1]), self.weight([out_channels])
        output = self.op("Conv", [channels_first.name, weight, bias], kernel_shape=[1])
        return self.transpose(Tensor(output, 3, out_channels), [0, 2, 1])

    def conv_transpose(
        self,
        x: Tensor,
        out_channels: int,
        kernel: int,
        *,
        stride: int,
        padding: int,
        output_padding: int = 0,
        bias: bool = True,
    ) -> Tensor:
        inputs = [x.name, self.weight([x.features, out_channels, kernel, kernel])]
        if bias:
            inputs.append(self.weight([out_channels]))
        output = self.op(
            "ConvTranspose",
            inputs,
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[padding] * 4,
            output_padding=[output_padding] * 2,
        )
        return Tensor(output, 4, out_channels)

    def batch_norm(self, x: Tensor) -> Tensor:
        c = x.features
        scale, shift = self.weight([c]), self.weight([c])
        mean, var = self.weight([c]), self.weight([c])  # running statistics: buffers
        return Tensor(self.op("BatchNormalization", [x.name, scale, shift, mean, var]), x.rank, c)

    def instance_norm(self, x: Tensor) -> Tensor:
        """torch.nn.InstanceNorm2d with its default affine=False: scale and shift are constants."""
        ones = self.constant([1.0] * x.features, np.float32)
        zeros = self.constant([0.0] * x.features, np.float32)
        return Tensor(self.op("InstanceNormalization", [x.name, ones, zeros]), x.rank, x.features)

    def layer_norm(self, x: Tensor) -> Tensor:
        scale, shift = self.weight([x.features]), self.weight([x.features])
        return Tensor(self.op("LayerNormalization", [x.name, scale, shift], axis=-1), x.rank, x.features)

    def act(self, x: Tensor, op_type: str = "Relu", **attributes: object) -> Tensor:
        return Tensor(self.op(op_type, [x.name], **attributes), x.rank, x.features)

    def relu6(self, x: Tensor) -> Tensor:
        zero, six = self.constant([0.0], np.float32), self.constant([6.0], np.float32)
        return Tensor(self.op("Clip", [x.name, self._scalar(zero), self._scalar(six)]), x.rank, x.features)

    def swish(self, x: Tensor) -> Tensor:
        return self.mul(x, self.act(x, "Sigmoid"))

    def _scalar(self, name: str) -> str:
        return self.op("Squeeze", [name, self.constant([0])])

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return Tensor(self.op("Add", [a.name, b.name]), max(a.rank, b.rank), max(a.features, b.features))

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return Tensor(self.op("Mul", [a.name, b.name]), max(a.rank, b.rank), max(a.features, b.features))

    def scale(self, x: Tensor, factor: float) -> Tensor:
        return Tensor(self.op("Mul", [x.name, self.constant([factor], np.float32)]), x.rank, x.features)

    def max_pool(self, x: Tensor, kernel: int, stride: int, padding: int = 0, ceil: bool = False) -> Tensor:
        output = self.op(
            "MaxPool",
            [x.name],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[padding] * 4,
            ceil_mode=int(ceil),
        )
        return Tensor(output, 4, x.features)

    def avg_pool(self, x: Tensor, kernel: int, stride: int, padding: int = 0) -> Tensor:
        output = self.op(
            "AveragePool",
            [x.name],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[padding] * 4,
        )
        return Tensor(output, 4, x.features)

    def global_avg_pool(self, x: Tensor) -> Tensor:
        return Tensor(self.op("GlobalAveragePool", [x.name]), 4, x.features)

    def flatten(self, x: Tensor, features: int | None = None) -> Tensor:
        return Tensor(self.op("Flatten", [x.name], axis=1), 2, features or x.features)

    def concat(self, parts: Sequence[Tensor], axis: int = 1) -> Tensor:
        total = sum(part.features for part in parts)
        return Tensor(self.op("Concat", [part.name for part in parts], axis=axis), parts[0].rank, total)

    def split_channels(self, x: Tensor, sizes: Sequence[int]) -> list[Tensor]:
        outputs = [self._fresh("split") for _ in sizes]
        self._nodes.append(helper.make_node("Split", [x.name, self.constant(list(sizes))], outputs, axis=1))
        return [Tensor(name, x.rank, size) for name, size in zip(outputs, sizes, strict=True)]

    def reshape(self, x: Tensor, shape: Sequence[int], features: int) -> Tensor:
        """Reshape; a 0 in `shape` keeps that dimension (so the symbolic batch passes through)."""
        return Tensor(self.op("Reshape", [x.name, self.constant(list(shape))]), len(shape), features)

    def transpose(self, x: Tensor, perm: Sequence[int], features: int | None = None) -> Tensor:
        return Tensor(self.op("Transpose", [x.name], perm=list(perm)), x.rank, features or x.features)

    def pad(self, x: Tensor, pads: Sequence[int], mode: str = "constant") -> Tensor:
        return Tensor(self.op("Pad", [x.name, self.constant(list(pads))], mode=mode), x.rank, x.features)

    def upsample(self, x: Tensor, factor: int) -> Tensor:
        scales = self.constant([1.0, 1.0, float(factor), float(factor)], np.float32)
        return Tensor(self.op("Resize", [x.name, "", scales], mode="nearest"), x.rank, x.features)

    def linear(self, x: Tensor, out_features: int, *, bias: bool = True) -> Tensor:
        """torch.nn.Linear: Gemm on 2-D input, MatMul (+ Add) on higher ranks."""
        if x.rank == 2:
            inputs = [x.name, self.weight([out_features, x.features])]
            if bias:
                inputs.append(self.weight([out_features]))
            return Tensor(self.op("Gemm", inputs, transB=1), 2, out_features)
        output = Tensor(
            self.op("MatMul", [x.name, self.weight([x.features, out_features])]), x.rank, out_features
        )
        if not bias:
            return output
        return Tensor(self.op("Add", [output.name, self.weight([out_features])]), x.rank, out_features)

    def embedding(self, ids: Tensor, vocabulary: int, dim: int) -> Tensor:
        table = self.weight([vocabulary, dim])
        return Tensor(self.op("Gather", [table, ids.name]), ids.rank + 1, dim)

    def lstm(self, x: Tensor, hidden: int, *, layers: int = 1) -> Tensor:
        """torch.nn.LSTM (unidirectional): one ONNX LSTM node per layer, Y squeezed to 3-D."""
        for _ in range(layers):
            w = self.weight([1, 4 * hidden, x.features])
            r = self.weight([1, 4 * hidden, hidden])
            b = self.weight([1, 8 * hidden])  # PyTorch's b_ih and b_hh
            y = self.op("LSTM", [x.name, w, r, b], hidden_size=hidden)
            # Y is [T, D, N, H] (time-major, as torch.nn.LSTM by default); drop D = 1
            x = Tensor(self.op("Squeeze", [y, self.constant([1])]), 3, hidden)
        return x

    def matmul(self, a: Tensor, b: Tensor, features: int) -> Tensor:
        """Activation × activation product (attention scores, attention-weighted values)."""
        return Tensor(self.op("MatMul", [a.name, b.name]), a.rank, features)

    def multi_head_attention(
        self,
        query: Tensor,
        memory: Tensor,
        *,
        heads: int,
        seq_q: int,
        seq_kv: int,
        head_dim: int | None = None,
        bias: bool = True,
        mask: Tensor | None = None,
    ) -> Tensor:
        """Scaled dot-product attention over [N, S, d] tensors, as in nn.MultiheadAttention; `mask`
        is added to the scores (e.g. a causal mask of -inf above the diagonal)."""
        d_model = query.features
        d_head = head_dim or d_model // heads
        width = heads * d_head

        def split_heads(t: Tensor, seq: int, perm: Sequence[int]) -> Tensor:
            return self.transpose(self.reshape(t, [0, seq, heads, d_head], d_head), perm)

        q = split_heads(self.linear(query, width, bias=bias), seq_q, [0, 2, 1, 3])
        k = split_heads(self.linear(memory, width, bias=bias), seq_kv, [0, 2, 3, 1])
        v = split_heads(self.linear(memory, width, bias=bias), seq_kv, [0, 2, 1, 3])
        scores = self.scale(self.matmul(q, k, seq_kv), 1.0 / d_head**0.5)
        if mask is not None:
            scores = self.add(scores, mask)
        context = self.matmul(self.act(scores, "Softmax", axis=-1), v, d_head)
        merged = self.reshape(self.transpose(context, [0, 2, 1, 3]), [0, seq_q, width], width)
        return self.linear(merged, d_model, bias=bias)
