"""The per-process floor: data per GPU generation and runtime, each value traceable to a measurement."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.prediction import artifacts, catalog, memory
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.memory import MemoryModel

REPO = Path(__file__).resolve().parents[3]
TABLE = REPO / "horus_operator" / "prediction" / "data" / "process_floor.csv"
MEMORY = REPO / "data" / "memory"
# Loaded once: its hypothesis tests ask it for hundreds of predictions (0.2 s a load).
SHIPPED = artifacts.load().memory


def _rows() -> list[dict[str, str]]:
    with TABLE.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_generation_and_runtime_has_a_floor_that_says_where_it_comes_from() -> None:
    rows = _rows()
    keys = {(row["generation"], row["runtime"]) for row in rows}
    assert len(keys) == len(rows)
    generations = {spec.generation for spec in GPU_SPECS.values()}
    assert keys == {(generation, runtime) for generation in generations for runtime in memory.RUNTIMES}
    floors = memory.process_floors()
    for row in rows:
        assert row["source"], row
        if row["derivation"] != "measured":
            # a nearer generation's value, and that generation is named
            nearest = row["derivation"].removeprefix("nearest generation: ")
            assert nearest in generations and nearest != row["generation"], row
            assert float(row["floor_mib"]) == floors[(nearest, row["runtime"])], row


def test_the_measured_floors_are_the_tiny_models_peaks_they_cite() -> None:
    milabench = pd.read_csv(MEMORY / "milabench_scaling_nvidia.csv")
    atari = milabench[milabench["bench"] == "torchatari"].groupby("gpu")["memory_mib"].min()
    miso = pd.read_csv(MEMORY / "miso_a100_40gb_tensorflow.csv")
    dummy = miso.loc[miso["bench"] == "dummy", "memory_mib"]
    floors = memory.process_floors()
    assert floors[("hopper", "pytorch")] == atari["H100"] == 1511
    assert floors[("ada", "pytorch")] == atari["L40S"] == 1133
    assert floors[("ampere", "tensorflow")] == dummy.item() == 1401
    measured = {(row["generation"], row["runtime"]) for row in _rows() if row["derivation"] == "measured"}
    assert measured == {("hopper", "pytorch"), ("ada", "pytorch"), ("ampere", "tensorflow")}


def test_the_floor_comes_on_top_of_the_overhead_where_the_model_has_one() -> None:
    job = catalog.lookup("resnet50", 32)
    plain = MemoryModel(overhead_mib=100.0, activation_factor=1.0)
    floored = MemoryModel(overhead_mib=100.0, activation_factor=1.0, process_floor=True)
    assert plain.memory_mib(job, "fp32", "h100") == plain.memory_mib(job, "fp32")
    assert floored.memory_mib(job, "fp32", "h100") - plain.memory_mib(job, "fp32") == 1511
    assert floored.memory_mib(job, "fp32", "l40s") - plain.memory_mib(job, "fp32") == 1133
    # TensorFlow's: outside its allocator's arena (test_memory_framework.py)
    assert floored.constant_mib("a100-40gb", "tensorflow") == 1401
    # no GPU named: the largest floor of the runtime
    assert floored.memory_mib(job, "fp32") == floored.memory_mib(job, "fp32", "h100")
    with pytest.raises(KeyError):
        memory.process_floor_mib("h100", "jax")


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["resnet50", "bert", "vgg16", "mobilenet_v2", "gpt2"]),
    batch=st.integers(min_value=1, max_value=512),
    gpu=st.sampled_from(sorted(GPU_SPECS)),
    precision=st.sampled_from(["fp32", "amp", "bf16"]),
)
def test_the_shipped_prediction_holds_the_floor_and_grows_with_the_batch(
    model: str, batch: int, gpu: str, precision: str
) -> None:
    shipped = SHIPPED
    job, larger = catalog.lookup(model, batch), catalog.lookup(model, batch + 1)
    predicted = shipped.memory_mib(job, precision, gpu)
    assert predicted >= memory.process_floor_mib(gpu) + 2 * job["param_bytes"] / memory.MIB
    assert shipped.memory_mib(larger, precision, gpu) >= predicted
    assert shipped.memory_mib(job, precision) >= predicted  # any GPU: the largest floor
    assert shipped.floor_mib(job, precision) <= predicted
