"""Graph features on small ONNX graphs whose FLOPs and parameters are worked out by hand below."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from horus_operator.commands.features import features as features_command
from horus_operator.prediction import features, graph_profile


def _model(nodes, inputs, initializers=(), outputs=("y",)) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info(name, elem, shape) for name, elem, shape in inputs],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        initializer=[
            numpy_helper.from_array(np.zeros(shape, dtype), name) for name, shape, dtype in initializers
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_model(batch: int | str = "N", weights_as_inputs: bool = False) -> onnx.ModelProto:
    """3×3 convolution, 3 → 4 channels, 8×8 image, padding 1, with bias; then ReLU."""
    weights = [("w", (4, 3, 3, 3), np.float32), ("b", (4,), np.float32)]
    inputs = [("x", TensorProto.FLOAT, [batch, 3, 8, 8])]
    if weights_as_inputs:  # torch.onnx.export(..., export_params=False) writes weights as inputs
        inputs += [(name, TensorProto.FLOAT, list(shape)) for name, shape, _ in weights]
        weights = []
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    return _model(nodes, inputs, weights)


# Conv: 2 FLOPs × (4 channels × 8 × 8 outputs) × (3 input channels × 3 × 3 kernel) = 13,824;
# ReLU: one FLOP per output element, 4 × 8 × 8 = 256.
CONV_FLOPS = 2 * (4 * 8 * 8) * (3 * 3 * 3)
CONV_PARAMS = 4 * 3 * 3 * 3 + 4  # weights + bias = 112


def test_conv_flops_params_and_counts():
    profile = graph_profile.profile_onnx(conv_model())
    assert profile["conv_flops_per_sample"] == CONV_FLOPS
    assert profile["flops_per_sample"] == CONV_FLOPS + 4 * 8 * 8
    assert profile["params"] == CONV_PARAMS
    assert profile["param_bytes"] == CONV_PARAMS * 4
    assert profile["input_bytes_per_sample"] == 3 * 8 * 8 * 4
    # conv output and relu output, 4×8×8 float32 each
    assert profile["activation_bytes_per_sample"] == 2 * 4 * 8 * 8 * 4
    assert (profile["conv_ops"], profile["activation_ops"], profile["linear_ops"]) == (1, 1, 0)


def test_fixed_and_symbolic_batch_give_the_same_per_sample_profile():
    fixed, symbolic = (graph_profile.profile_onnx(conv_model(batch=batch)) for batch in (8, "N"))
    assert fixed == symbolic


def test_weights_exported_as_graph_inputs_are_parameters_not_data():
    profile = graph_profile.profile_onnx(conv_model(weights_as_inputs=True))
    assert profile["params"] == CONV_PARAMS
    assert profile["input_bytes_per_sample"] == 3 * 8 * 8 * 4


def test_gemm_linear_layer():
    """Linear 10 → 5 with bias: 2 × 5 × 10 = 100 FLOPs per sample, 55 parameters."""
    model = _model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
        [("x", TensorProto.FLOAT, ["N", 10])],
        [("w", (5, 10), np.float32), ("b", (5,), np.float32)],
    )
    profile = graph_profile.profile_onnx(model)
    assert profile["flops_per_sample"] == profile["linear_flops_per_sample"] == 100
    assert profile["params"] == 55
    assert profile["linear_ops"] == 1


def test_lstm_is_unrolled_per_time_step():
    """LSTM, 7 time steps (time-major, batch on axis 1), input 3, hidden 4: gate rows 4H = 16.

    FLOPs per sample = 2 × 7 steps × 16 × (3 + 4) = 1,568; parameters = W 16×3 + R 16×4 + B 32 = 144.
    Each step is 2 linear ops (input and hidden projections) and 5 nonlinearities (3 σ, 2 tanh).
    """
    model = _model(
        [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=4)],
        [("x", TensorProto.FLOAT, [7, "batch", 3])],
        [("w", (1, 16, 3), np.float32), ("r", (1, 16, 4), np.float32), ("b", (1, 32), np.float32)],
    )
    profile = graph_profile.profile_onnx(model)
    assert profile["flops_per_sample"] == profile["linear_flops_per_sample"] == 1568
    assert profile["params"] == 144
    assert profile["linear_ops"] == 14
    assert profile["activation_ops"] == 35
    assert (profile["recurrent_ops"], profile["recurrent_steps"]) == (1, 7)
    assert profile["recurrent_step_ops"] == 14 + 35  # all of them come from unrolling the layer


def test_transposed_convolution_counts_what_each_input_element_scatters():
    """ConvTranspose 2 → 4 channels, 3×3 kernel, stride 2, on a 3×3 input (output 6×6): each of the
    2·3·3 = 18 input elements is multiplied into 4·3·3 = 36 outputs: 2 × 18 × 36 = 1,296 FLOPs."""
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w"],
        ["y"],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        output_padding=[1, 1],
    )
    model = _model([node], [("x", TensorProto.FLOAT, ["N", 2, 3, 3])], [("w", (2, 4, 3, 3), np.float32)])
    profile = graph_profile.profile_onnx(model)
    assert profile["conv_flops_per_sample"] == 1296
    assert profile["activation_bytes_per_sample"] == 4 * 6 * 6 * 4


def attention_model() -> onnx.ModelProto:
    """Single-head self-attention on [N, 5 tokens, 8 wide]: q, k, v projections, softmax(q·kᵀ)·v."""
    projections = [helper.make_node("MatMul", ["x", f"w{name}"], [name]) for name in "qkv"]
    nodes = [
        *projections,
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    weights = [(f"w{name}", (8, 8), np.float32) for name in "qkv"]
    return _model(nodes, [("x", TensorProto.FLOAT, ["N", 5, 8])], weights)


def test_attention_matmuls_are_told_apart_from_linear_layers():
    """Projections: 3 × 2·5·8·8 = 1,920. q·kᵀ: 2·5·5·8 = 400. p·v: 2·5·8·5 = 400. Softmax: 25."""
    profile = graph_profile.profile_onnx(attention_model())
    assert profile["linear_flops_per_sample"] == 1920
    assert profile["attention_flops_per_sample"] == 800
    assert profile["flops_per_sample"] == 1920 + 800 + 25
    assert (profile["linear_ops"], profile["attention_ops"], profile["activation_ops"]) == (3, 2, 1)
    assert profile["params"] == 3 * 64


def test_projection_through_a_transposed_tied_embedding_is_linear():
    """x · Eᵀ with E a parameter table: computed from weights only, so a linear layer (2·8·30 FLOPs)."""
    model = _model(
        [
            helper.make_node("Transpose", ["table"], ["table_t"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "table_t"], ["y"]),
        ],
        [("x", TensorProto.FLOAT, ["N", 8])],
        [("table", (30, 8), np.float32)],
    )
    profile = graph_profile.profile_onnx(model)
    assert (profile["linear_ops"], profile["attention_ops"]) == (1, 0)
    assert profile["linear_flops_per_sample"] == 2 * 8 * 30


def test_batchnorm_statistics_and_integer_initializers_are_not_parameters():
    nodes = [
        helper.make_node("BatchNormalization", ["x", "scale", "shift", "mean", "var"], ["n"]),
        helper.make_node("Reshape", ["n", "shape"], ["y"]),
    ]
    initializers = [(name, (3,), np.float32) for name in ("scale", "shift", "mean", "var")]
    model = _model(
        nodes, [("x", TensorProto.FLOAT, ["N", 3, 2, 2])], [*initializers, ("shape", (2,), np.int64)]
    )
    model.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([0, -1], np.int64), "shape"))
    profile = graph_profile.profile_onnx(model)
    assert profile["params"] == 6  # scale and shift, 3 channels each
    assert profile["norm_ops"] == 1
    assert profile["other_ops"] == 1


def test_features_scale_with_batch_size():
    one, many = graph_profile.from_onnx(conv_model(), 1), graph_profile.from_onnx(conv_model(), 32)
    assert many["batch_size"] == 32
    assert many["flops_per_batch"] == 32 * one["flops_per_batch"] == 32 * one["flops_per_sample"]
    assert many["activation_bytes_per_batch"] == 32 * one["activation_bytes_per_sample"]
    assert many["params"] == one["params"]
    assert set(many) == set(features.FEATURE_NAMES)


def test_a_profile_written_before_recurrent_step_ops_existed_still_works():
    profile = graph_profile.profile_onnx(conv_model())
    del profile["recurrent_step_ops"]
    assert features.at_batch(profile, 8)["recurrent_step_ops"] == 0.0
    del profile["recurrent_steps"]
    with pytest.raises(ValueError, match="recurrent_steps"):
        features.at_batch(profile, 8)


def test_from_onnx_reads_bytes_and_paths(tmp_path: Path):
    path = tmp_path / "conv.onnx"
    onnx.save(conv_model(), path)
    from_bytes = graph_profile.from_onnx(conv_model().SerializeToString(), 4)
    assert graph_profile.from_onnx(path, 4) == graph_profile.from_onnx(str(path), 4) == from_bytes


@pytest.mark.parametrize("unreadable", [b"certainly not protobuf \xff\xfe", b"", "/nonexistent/model.onnx"])
def test_unreadable_onnx_is_a_value_error(unreadable):
    with pytest.raises(ValueError, match="ONNX"):
        graph_profile.from_onnx(unreadable, 8)


def test_unknown_non_batch_dimension_is_a_value_error():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, ["N", "sequence"])])
    with pytest.raises(ValueError, match="symbolic"):
        graph_profile.from_onnx(model, 8)


def test_a_matmul_of_unknown_size_is_a_value_error_not_a_silent_zero():
    """The Reshape target comes from a data input, so inference cannot size the MatMul."""
    model = _model(
        [helper.make_node("Reshape", ["x", "target"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])],
        [("x", TensorProto.FLOAT, ["N", 4]), ("target", TensorProto.INT64, [2])],
        [("w", (4, 3), np.float32)],
    )
    with pytest.raises(ValueError, match="unknown"):
        graph_profile.from_onnx(model, 8)


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="batch size"):
        graph_profile.from_onnx(conv_model(), 0)


# ---- horus features ----


def test_cli_prints_a_table_for_an_onnx_file(tmp_path: Path):
    path = tmp_path / "conv.onnx"
    onnx.save(conv_model(), path)
    result = CliRunner().invoke(features_command, [str(path), "--batch-size", "2"])
    assert result.exit_code == 0, result.output
    rows = dict(line.split(maxsplit=1) for line in result.output.splitlines() if not line.startswith("#"))
    assert rows["conv_flops_per_sample"].strip() == f"{CONV_FLOPS:,}"
    assert rows["batch_size"].strip() == "2"
    assert list(rows) == list(features.FEATURE_NAMES)


def test_cli_json_for_a_catalog_model():
    result = CliRunner().invoke(features_command, ["ResNet-50", "-b", "64", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["model"].startswith("catalog:resnet50")
    assert document["features"]["batch_size"] == 64


def test_cli_rejects_unknown_models_and_unreadable_files(tmp_path: Path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage")
    for argument in ("no-such-model", str(bad)):
        result = CliRunner().invoke(features_command, [argument, "-b", "1"])
        assert result.exit_code != 0
        assert "Error" in result.output
