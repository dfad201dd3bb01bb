"""The graph features Horus predicts from: their names, and a profile scaled to a batch size.

Horus predicts GPU utilization and co-location interference from what the model's graph says (FLOPs,
parameters, counts of convolution / linear / activation / other layers, batch size), not from kernel
profiling. This module names those numbers (a batch-independent profile and the quantities that depend
on the batch size); it reads no graph: `graph_profile` counts them on an ONNX graph, `transformer` on a
Hugging Face config, and the catalog stores the profiles of known architectures. It imports no `onnx`
(about a second), so the operator, the agent and the simulator, which read these names, start without it.

Per-sample quantities come from the graph at one batch size and scale linearly, so `at_batch`
gives the features at any batch size from a batch-independent profile (the catalog stores those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# Batch-independent quantities of a graph: what the catalog stores per model.
PROFILE_NAMES: tuple[str, ...] = (
    "flops_per_sample",  # forward FLOPs for one sample (multiply-add = 2)
    "conv_flops_per_sample",  # part of flops_per_sample in convolutions
    "linear_flops_per_sample",  # part in Gemm/MatMul with a weight operand and in recurrent cells
    "attention_flops_per_sample",  # part in activation×activation MatMuls (Q·Kᵀ, P·V)
    "params",  # number of trainable parameters (weights, biases, norm scales, embeddings)
    "param_bytes",  # their size in bytes at the graph's dtypes
    "activation_bytes_per_sample",  # outputs of compute nodes for one sample
    "input_bytes_per_sample",  # model inputs for one sample (what the data loader delivers)
    "conv_ops",  # Conv / ConvTranspose nodes
    "linear_ops",  # Gemm / MatMul with a weight, + 2 per recurrent time step and direction
    "activation_ops",  # Relu, Sigmoid, Tanh, Gelu, Softmax, … + recurrent gate nonlinearities per step
    "norm_ops",  # BatchNorm, LayerNorm, InstanceNorm, GroupNorm, LRN
    "pool_ops",  # Max/Average/Global pooling
    "recurrent_ops",  # LSTM / GRU / RNN layers
    "recurrent_steps",  # time steps × directions over all recurrent layers
    "recurrent_step_ops",  # the linear and activation ops that unrolling the recurrent layers added
    "attention_ops",  # activation×activation MatMuls and fused attention nodes
    "embedding_ops",  # Gather from a parameter table
    "elementwise_ops",  # Add, Mul, Div, Sqrt, reductions, …
    "other_ops",  # layout and bookkeeping: Reshape, Transpose, Concat, Slice, Dropout, Pad, …
)
# Quantities that depend on the batch size.
BATCH_NAMES: tuple[str, ...] = (
    "batch_size",
    "flops_per_batch",  # flops_per_sample × batch_size
    "activation_bytes_per_batch",  # activation_bytes_per_sample × batch_size
    "input_bytes_per_batch",  # input_bytes_per_sample × batch_size
)
FEATURE_NAMES: tuple[str, ...] = PROFILE_NAMES + BATCH_NAMES
# Profile entries a profile may leave out, and the value they then take: a profile written before the
# entry existed (a DLJob's spec.model.features) stays valid, its unrolled recurrent ops then counted as
# host dispatches of their own.
OPTIONAL_PROFILE: Mapping[str, float] = {"recurrent_step_ops": 0.0}
# Memory terms a profile may add where it knows more than a graph says (`transformer.describe`: LoRA,
# gradient checkpointing, the optimizer, the loss); absent, `memory.MemoryModel` derives them from
# param_bytes and the activation bytes (no loss beyond the graph). Not model inputs: FEATURE_NAMES, the
# columns the shipped models read, stay as they are. `at_batch` carries them, the per-sample ones also
# per batch (`…_per_batch`).
MEMORY_NAMES: tuple[str, ...] = (
    # every weight as loaded in half precision or NF4 (no FP32 copy, no autocast copies), or one GPU's
    # share of them under FSDP
    "weight_bytes",
    "trainable_param_bytes",  # parameters with gradients (in their dtype): all unless adapters are trained
    # the gradients one GPU holds at once, where fewer than trainable_param_bytes: one parameter's under
    # optimizer-in-backward, a share under FSDP/ZeRO
    "gradient_bytes",
    # what the optimizer keeps for them (Adam: two moments, in their dtype; 8-bit: 1 byte each), on one GPU
    "optimizer_state_bytes",
    # what the optimizer's step allocates for a moment beyond its state, after backward freed the
    # activations (torch's foreach Adam: a copy of the parameters it steps), on one GPU
    "optimizer_step_bytes",
    # held for backward under checkpointing, LoRA, SDPA attention or activation offloading
    "kept_activation_bytes_per_sample",
    # held at FP32 whatever the precision, beyond the graph (the loss; one chunk's under a chunked loss)
    "fp32_activation_bytes_per_sample",
)


def at_batch(profile: Mapping[str, float], batch_size: int) -> dict[str, float]:
    """Features at `batch_size` from a batch-independent profile (per-sample quantities scale)."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, got {batch_size}")
    missing = [name for name in PROFILE_NAMES if name not in profile and name not in OPTIONAL_PROFILE]
    if missing:
        raise ValueError(f"profile lacks {', '.join(missing)}")
    features = {name: float(profile.get(name, OPTIONAL_PROFILE.get(name, 0.0))) for name in PROFILE_NAMES}
    features["batch_size"] = float(batch_size)
    features["flops_per_batch"] = features["flops_per_sample"] * batch_size
    features["activation_bytes_per_batch"] = features["activation_bytes_per_sample"] * batch_size
    features["input_bytes_per_batch"] = features["input_bytes_per_sample"] * batch_size
    features.update({name: float(profile[name]) for name in MEMORY_NAMES if name in profile})
    for name in ("kept_activation_bytes", "fp32_activation_bytes"):
        per_sample = features.get(f"{name}_per_sample")
        if per_sample is not None:
            features[f"{name}_per_batch"] = per_sample * batch_size
    return features


def describe(features: Mapping[str, float]) -> Iterable[tuple[str, float]]:
    """(name, value) pairs in FEATURE_NAMES order, for printing."""
    return ((name, features[name]) for name in FEATURE_NAMES if name in features)
