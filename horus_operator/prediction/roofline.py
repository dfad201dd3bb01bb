"""A training step's time on a GPU from its graph, roofline-style, and the busy fraction that follows.

For one training step (forward + backward + optimizer) of a job at a batch size and precision on a GPU
from the GPU table:

    matmul_ms  = 3 × (conv + linear + attention FLOPs) / (peak(precision) × efficiency(precision))
    other_ms   = 3 × (remaining FLOPs) / (FP32 peak × matmul_efficiency)
    traffic_ms = (TRAFFIC_PER_ACTIVATION_BYTE × activation bytes × bytes_scale(precision)
                  + TRAFFIC_PER_PARAM_BYTE × parameter bytes) / (bandwidth × bandwidth_efficiency)
    kernels    = KERNELS_PER_OP × operators in the graph (+ KERNELS_PER_RECURRENT_STEP per time step)
    dispatches = KERNELS_PER_OP × operators, a recurrent layer counted once (not once per time step)
    gpu_ms     = max(matmul_ms + other_ms, traffic_ms) + kernels × kernel_floor_us
    host_ms    = dispatches × host_us_per_kernel + step_overhead_ms
    step_ms    = max(gpu_ms, host_ms)   (the host enqueues ahead of the GPU: the slower side sets the pace)
    busy       = gpu_ms / step_ms       (the share of time a kernel runs: nvidia-smi's utilization)

efficiency(precision) is `matmul_efficiency` on the FP32 path and `tensor_efficiency` on a GPU's
FP16/BF16 tensor path (amp, bf16): the share of peak achieved differs between the two paths.

A recurrent layer (ONNX LSTM / GRU / RNN) runs as one fused library call per layer (cuDNN): its time
steps launch kernels on the GPU, but the host dispatches the layer once forward and once backward.

A GPU with a higher peak or bandwidth shortens `gpu_ms`; the host side does not get faster with the GPU,
so a small model on an H100 is host-bound and shows a low utilization, as measured. The constants in
`RooflineConstants` are calibrated on measured step times and utilizations (`training.calibrate_roofline`),
never replaced by a lookup: a new GPU or graph gets its estimate from these formulas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from horus_operator.prediction.gpus import GpuSpec

TRAINING_FLOPS_FACTOR = 3.0  # backward ≈ 2 × forward
# Activations: written in forward, read in backward, their gradients written and read.
TRAFFIC_PER_ACTIVATION_BYTE = 4.0
# Parameters: read in forward and backward, gradient written, Adam reads parameter, gradient and two
# moments and writes three of them back.
TRAFFIC_PER_PARAM_BYTE = 10.0
KERNELS_PER_OP = 3.0  # a forward kernel, and about two in backward (input and weight gradients)
KERNELS_PER_RECURRENT_STEP = 6.0  # gate kernels of one cell step, forward and backward
_COUNTED_OPS = (
    "conv_ops",
    "linear_ops",
    "activation_ops",
    "norm_ops",
    "pool_ops",
    "attention_ops",
    "embedding_ops",
    "elementwise_ops",
)
_MATMUL_FLOPS = ("conv_flops_per_sample", "linear_flops_per_sample", "attention_flops_per_sample")


@dataclass(frozen=True)
class RooflineConstants:
    """What the datasheet does not say: achieved shares of peak, and fixed costs per kernel and step."""

    matmul_efficiency: float = 0.5
    bandwidth_efficiency: float = 0.7
    kernel_floor_us: float = 3.0  # the shortest a kernel occupies the GPU
    host_us_per_kernel: float = 12.0  # framework dispatch and launch on the CPU
    step_overhead_ms: float = 1.0  # optimizer bookkeeping, data hand-off, synchronisation per step
    tensor_efficiency: float = 0.3  # share of the FP16/BF16 tensor peak reached (amp, bf16)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


# Physically plausible range of each constant, in field order: calibration stays inside it.
CONSTANT_BOUNDS: tuple[tuple[float, float], ...] = (
    (0.05, 1.0),  # matmul_efficiency
    (0.05, 1.0),  # bandwidth_efficiency
    (0.5, 50.0),  # kernel_floor_us
    (3.0, 200.0),  # host_us_per_kernel: a CUDA launch alone costs the CPU 2-4 µs, framework dispatch more
    (0.01, 500.0),  # step_overhead_ms
    (0.02, 1.0),  # tensor_efficiency
)


@dataclass(frozen=True)
class StepEstimate:
    matmul_ms: float
    other_ms: float
    traffic_ms: float
    kernels: float
    gpu_ms: float
    host_ms: float

    @property
    def step_ms(self) -> float:
        return max(self.gpu_ms, self.host_ms)

    @property
    def busy(self) -> float:
        """Fraction of the step with a kernel on the GPU (0..1)."""
        return self.gpu_ms / self.step_ms if self.step_ms > 0 else 0.0

    @property
    def compute_share(self) -> float:
        """How much of the GPU time arithmetic would take (vs memory traffic): 0..1."""
        compute = self.matmul_ms + self.other_ms
        return compute / (compute + self.traffic_ms) if compute + self.traffic_ms > 0 else 0.0

    @property
    def kernel_us(self) -> float:
        """Mean GPU time per kernel: short kernels interleave finely with a co-runner's."""
        return 1000.0 * self.gpu_ms / self.kernels if self.kernels else 0.0


def bytes_scale(precision: str) -> float:
    """Activations are stored in half precision under amp and bf16."""
    return 1.0 if precision == "fp32" else 0.5


def kernels_per_step(job_features: Mapping[str, float]) -> float:
    """Kernels a training step runs on the GPU, each recurrent time step's included."""
    ops = sum(float(job_features.get(name, 0.0)) for name in _COUNTED_OPS)
    steps = float(job_features.get("recurrent_steps", 0.0))
    return KERNELS_PER_OP * ops + KERNELS_PER_RECURRENT_STEP * steps


def dispatches_per_step(job_features: Mapping[str, float]) -> float:
    """Kernel launches the host issues in a training step: a recurrent layer is one fused call, so the
    ops its unrolled time steps add (`recurrent_step_ops`) cost the host nothing beyond the layer's."""
    ops = sum(float(job_features.get(name, 0.0)) for name in _COUNTED_OPS)
    fused = float(job_features.get("recurrent_ops", 0.0)) - float(job_features.get("recurrent_step_ops", 0.0))
    return KERNELS_PER_OP * (ops + fused)


def estimate(
    job_features: Mapping[str, float], spec: GpuSpec, precision: str, constants: RooflineConstants
) -> StepEstimate:
    """The step-time estimate of a job (features at its batch size) on `spec` at `precision`."""
    batch = float(job_features["batch_size"])
    flops = TRAINING_FLOPS_FACTOR * batch * float(job_features["flops_per_sample"])
    matmul_flops = TRAINING_FLOPS_FACTOR * batch * sum(float(job_features[name]) for name in _MATMUL_FLOPS)
    other_flops = max(0.0, flops - matmul_flops)
    on_tensor_path = spec.peak_tflops(precision) > spec.fp32_tflops
    activation_bytes = float(job_features["activation_bytes_per_batch"]) * bytes_scale(precision)
    traffic_bytes = TRAFFIC_PER_ACTIVATION_BYTE * activation_bytes + TRAFFIC_PER_PARAM_BYTE * float(
        job_features["param_bytes"]
    )
    matmul_efficiency = constants.tensor_efficiency if on_tensor_path else constants.matmul_efficiency
    matmul_ms = matmul_flops / (spec.peak_tflops(precision) * matmul_efficiency * 1e9)
    other_ms = other_flops / (spec.fp32_tflops * constants.matmul_efficiency * 1e9)
    traffic_ms = traffic_bytes / (spec.memory_bandwidth_gbs * constants.bandwidth_efficiency * 1e6)
    kernels = kernels_per_step(job_features)
    gpu_ms = max(matmul_ms + other_ms, traffic_ms) + kernels * constants.kernel_floor_us / 1000.0
    host_ms = (
        dispatches_per_step(job_features) * constants.host_us_per_kernel / 1000.0 + constants.step_overhead_ms
    )
    return StepEstimate(
        matmul_ms=matmul_ms,
        other_ms=other_ms,
        traffic_ms=traffic_ms,
        kernels=kernels,
        gpu_ms=gpu_ms,
        host_ms=host_ms,
    )
