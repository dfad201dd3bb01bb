"""The framework a job trains with: TensorFlow's allocator holds its arena in doubling regions (and
its convolutions' autotuning scratch), PyTorch's what is asked; a framework never lowers the shipped
prediction below PyTorch's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.prediction import artifacts, catalog
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.memory import ALLOCATORS, MemoryModel

TENSORFLOW = ALLOCATORS["tensorflow"]
# Loaded once: its hypothesis test asks it for hundreds of predictions (0.2 s a load).
SHIPPED = artifacts.load().memory


def test_pytorchs_allocator_holds_what_is_in_use() -> None:
    assert ALLOCATORS["pytorch"].arena_mib(1234.5, convolutions=True) == 1234.5


def test_tensorflows_arena_is_the_first_sum_of_doubling_regions_that_holds_what_is_in_use() -> None:
    # regions of 2, 4, 8, … MiB: 2, 6, 14, 30, … in all
    assert TENSORFLOW.arena_mib(1.0, convolutions=False) == 2
    assert TENSORFLOW.arena_mib(2.0, convolutions=False) == 2
    assert TENSORFLOW.arena_mib(2.5, convolutions=False) == 6
    assert TENSORFLOW.arena_mib(4094.0, convolutions=False) == 4094
    assert TENSORFLOW.arena_mib(4095.0, convolutions=False) == 8190
    # cuDNN's autotuning scratch (4 GiB unless TF_CUDNN_WORKSPACE_LIMIT_IN_MB says otherwise)
    assert TENSORFLOW.arena_mib(1000.0, convolutions=True) == 8190
    # the last region is cut to what the GPU has left; only what is in use goes beyond it
    assert TENSORFLOW.arena_mib(1000.0, convolutions=True, room_mib=6000.0) == 6000
    assert TENSORFLOW.arena_mib(7000.0, convolutions=False, room_mib=6000.0) == 7000


@settings(max_examples=200, deadline=None)
@given(in_use=st.floats(min_value=0.001, max_value=1e6), convolutions=st.booleans())
def test_tensorflows_arena_holds_what_is_in_use_and_less_than_twice_it(
    in_use: float, convolutions: bool
) -> None:
    wanted = in_use + (TENSORFLOW.conv_workspace_mib if convolutions else 0.0)
    arena = TENSORFLOW.arena_mib(in_use, convolutions)
    assert wanted <= arena * (1 + 1e-12)
    assert arena < 2 * wanted + 2.0


def test_a_tensorflow_job_that_fits_its_gpu_is_predicted_to_hold_at_most_all_of_it() -> None:
    shipped = artifacts.load().memory
    job = catalog.lookup("resnet50", 64)  # about 9 GiB in use: its next region would outgrow a V100
    assert shipped.memory_mib(job, "fp32", "v100", "tensorflow") == GPU_SPECS["v100"].memory_mib
    assert shipped.memory_mib(job, "fp32", None, "tensorflow") > GPU_SPECS["v100"].memory_mib


def test_the_framework_overhead_comes_on_its_framework_only() -> None:
    job = catalog.lookup("resnet50", 32)
    plain = MemoryModel(overhead_mib=100.0, activation_factor=1.0, process_floor=True)
    tf_overhead = MemoryModel(
        overhead_mib=100.0,
        activation_factor=1.0,
        process_floor=True,
        framework_overhead_mib={"tensorflow": 500.0},
    )
    assert tf_overhead.memory_mib(job, "fp32", "h100") == plain.memory_mib(job, "fp32", "h100")
    assert tf_overhead.memory_mib(job, "fp32", "a100-40gb", "tensorflow") - 500.0 == plain.memory_mib(
        job, "fp32", "a100-40gb", "tensorflow"
    )


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(["resnet50", "bert", "vgg16", "mobilenet_v2", "gpt2", "transformer"]),
    batch=st.integers(min_value=1, max_value=512),
    gpu=st.sampled_from(sorted(GPU_SPECS)),
    precision=st.sampled_from(["fp32", "amp", "bf16"]),
)
def test_tensorflow_never_lowers_the_shipped_prediction_below_pytorchs(
    model: str, batch: int, gpu: str, precision: str
) -> None:
    # Its arena holds at least what is in use and its fitted overhead outweighs the one floor that is
    # higher under PyTorch (Hopper's measured 1,511 MiB beside TensorFlow's borrowed 1,401).
    shipped = SHIPPED
    job = catalog.lookup(model, batch)
    pytorch = shipped.memory_mib(job, precision, gpu, "pytorch")
    assert shipped.memory_mib(job, precision, gpu, "tensorflow") >= pytorch
    assert shipped.memory_mib(job, precision, None, "tensorflow") >= shipped.memory_mib(job, precision, None)
