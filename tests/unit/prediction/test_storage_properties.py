"""Properties of how a described job stores its model (issue 45): predicted memory never falls as the
sequence, the batch or LoRA's rank grows, whatever the weights' dtype and attention; half-precision
weights cost less than FP32 ones, LoRA less than full fine-tuning, SDPA never more than eager."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_description_properties import decoders

from horus_operator.api import defaults
from horus_operator.prediction import artifacts, features, transformer
from horus_operator.prediction.transformer import Lora, Training

MEMORY = artifacts.load().memory
SETTINGS = settings(max_examples=40, deadline=None)
PRECISIONS = st.sampled_from(["fp32", "amp", "bf16"])
WEIGHTS = st.sampled_from(defaults.WEIGHTS_DTYPES)
ATTENTIONS = st.sampled_from(defaults.ATTENTIONS)


@st.composite
def trainings(draw: st.DrawFn) -> Training:
    """Any way the config route trains: LoRA or not, checkpointing or not, any dtype and attention."""
    lora = draw(st.none() | st.builds(Lora, st.integers(1, 64)))
    return Training(
        sequence_length=draw(st.integers(1, 256)),
        optimizer=draw(st.sampled_from(sorted(transformer.OPTIMIZER_STATES))),
        lora=lora,
        gradient_checkpointing=draw(st.booleans()),
        weights_dtype=draw(WEIGHTS),
        attention=draw(ATTENTIONS),
    )


def _memory(config: dict[str, Any], training: Training, batch: int, precision: str) -> tuple[float, float]:
    """(predicted peak, refusal floor) in MiB."""
    job = features.at_batch(transformer.describe(config, training).profile, batch)
    return MEMORY.memory_mib(job, precision), MEMORY.floor_mib(job, precision)


def _never_less(small: tuple[float, float], large: tuple[float, float]) -> bool:
    return large[0] >= small[0] and large[1] >= small[1]


@SETTINGS
@given(config=decoders(), training=trainings(), more=st.integers(1, 256), precision=PRECISIONS)
def test_a_longer_sequence_never_needs_less(
    config: dict[str, Any], training: Training, more: int, precision: str
) -> None:
    longer = Training(**{**vars(training), "sequence_length": training.sequence_length + more})
    assert _never_less(_memory(config, training, 2, precision), _memory(config, longer, 2, precision))


@SETTINGS
@given(config=decoders(), training=trainings(), batch=st.integers(1, 16), precision=PRECISIONS)
def test_a_larger_batch_never_needs_less(
    config: dict[str, Any], training: Training, batch: int, precision: str
) -> None:
    assert _never_less(
        _memory(config, training, batch, precision), _memory(config, training, batch + 1, precision)
    )


@SETTINGS
@given(config=decoders(), training=trainings(), more=st.integers(1, 64), precision=PRECISIONS)
def test_a_higher_lora_rank_never_needs_less(
    config: dict[str, Any], training: Training, more: int, precision: str
) -> None:
    low = Training(**{**vars(training), "lora": Lora(8)})
    high = Training(**{**vars(training), "lora": Lora(8 + more)})
    assert _never_less(_memory(config, low, 4, precision), _memory(config, high, 4, precision))


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_half_weights_need_less_than_fp32(config: dict[str, Any], training: Training, precision: str) -> None:
    fp32 = _memory(config, Training(**{**vars(training), "weights_dtype": "fp32"}), 4, precision)
    for half in ("bf16", "fp16"):
        memory, floor = _memory(config, Training(**{**vars(training), "weights_dtype": half}), 4, precision)
        assert memory < fp32[0] and floor < fp32[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_lora_at_a_small_rank_needs_less_than_full_fine_tuning(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    # rank 1 on PEFT's default targets: fewer trained parameters than any full fine-tune of these configs
    full = _memory(config, Training(**{**vars(training), "lora": None}), 4, precision)
    lora = _memory(config, Training(**{**vars(training), "lora": Lora(1)}), 4, precision)
    assert lora[0] < full[0] and lora[1] < full[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_sdpa_never_needs_more_than_eager(config: dict[str, Any], training: Training, precision: str) -> None:
    eager = _memory(config, Training(**{**vars(training), "attention": "eager"}), 4, precision)
    sdpa = _memory(config, Training(**{**vars(training), "attention": "sdpa"}), 4, precision)
    assert _never_less(sdpa, eager)
