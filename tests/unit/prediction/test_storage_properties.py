"""Properties of how a described job stores its model (issue 45): predicted memory and the refusal floor
never fall as the sequence, the batch or LoRA's rank grows, whatever the weights' dtype, attention,
optimizer and memory-saving settings; half-precision weights cost less than FP32 ones, QLoRA less
than LoRA, LoRA less than full fine-tuning, an 8-bit optimizer less than a 32-bit one, and SDPA,
optimizer-in-backward, a chunked loss, activation offloading, syncing each micro-batch and a fused
optimizer step never more than without, LoRA dropout never less; an FSDP
job's share of a GPU falls as it spreads over more GPUs."""

from __future__ import annotations

import dataclasses
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
UNQUANTISED = [dtype for dtype in defaults.WEIGHTS_DTYPES if dtype != transformer.NF4]
ATTENTIONS = st.sampled_from(defaults.ATTENTIONS)
SHARDINGS = st.builds(transformer.shard_over, st.sampled_from(defaults.SHARDINGS), st.integers(1, 8))


@st.composite
def trainings(draw: st.DrawFn) -> Training:
    """Any way the config route trains: LoRA or not, checkpointing or not, any dtype (NF4 under LoRA),
    attention, optimizer, and any of the memory-saving settings, on one GPU or sharded over several."""
    lora = draw(st.none() | st.builds(Lora, st.integers(1, 64), dropout=st.sampled_from([0.0, 0.05, 0.1])))
    dtypes = defaults.WEIGHTS_DTYPES if lora is not None else UNQUANTISED
    return Training(
        sequence_length=draw(st.integers(1, 256)),
        optimizer=draw(st.sampled_from(defaults.OPTIMIZERS)),
        lora=lora,
        gradient_checkpointing=draw(st.booleans()),
        weights_dtype=draw(st.sampled_from(dtypes)),
        attention=draw(ATTENTIONS),
        optimizer_in_backward=(in_backward := draw(st.booleans())),
        loss_chunks=draw(st.integers(1, 16)),
        activation_offloading=draw(st.booleans()),
        sharding=draw(SHARDINGS),
        gradient_accumulation_steps=1 if in_backward else draw(st.integers(1, 4)),
        sync_each_batch=draw(st.booleans()),
    )


def _memory(config: dict[str, Any], training: Training, batch: int, precision: str) -> tuple[float, float]:
    """(predicted peak, refusal floor) in MiB."""
    job = features.at_batch(transformer.describe(config, training).profile, batch)
    return MEMORY.memory_mib(job, precision), MEMORY.floor_mib(job, precision)


def _never_less(small: tuple[float, float], large: tuple[float, float]) -> bool:
    return large[0] >= small[0] and large[1] >= small[1]


def _with(training: Training, **changes: Any) -> Training:
    return dataclasses.replace(training, **changes)


@SETTINGS
@given(config=decoders(), training=trainings(), more=st.integers(1, 256), precision=PRECISIONS)
def test_a_longer_sequence_never_needs_less(
    config: dict[str, Any], training: Training, more: int, precision: str
) -> None:
    longer = _with(training, sequence_length=training.sequence_length + more)
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
    low, high = _with(training, lora=Lora(8)), _with(training, lora=Lora(8 + more))
    assert _never_less(_memory(config, low, 4, precision), _memory(config, high, 4, precision))


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_half_weights_need_less_than_fp32(config: dict[str, Any], training: Training, precision: str) -> None:
    fp32 = _memory(config, _with(training, weights_dtype="fp32"), 4, precision)
    for half in ("bf16", "fp16"):
        memory, floor = _memory(config, _with(training, weights_dtype=half), 4, precision)
        assert memory < fp32[0] and floor < fp32[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_lora_at_a_small_rank_needs_less_than_full_fine_tuning(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    # rank 1 on PEFT's default targets: fewer trained parameters than any full fine-tune of these configs.
    # A full fine-tune that steps in backward holds one gradient, which tiny configs' adapters and their
    # activations can outweigh: the property is for the full fine-tune that holds every gradient.
    training = _with(training, optimizer_in_backward=False)
    unquantised = training.weights_dtype if training.weights_dtype != transformer.NF4 else "bf16"
    full = _memory(config, _with(training, lora=None, weights_dtype=unquantised), 4, precision)
    lora = _memory(config, _with(training, lora=Lora(1), weights_dtype=unquantised), 4, precision)
    qlora = _memory(config, _with(training, lora=Lora(1), weights_dtype=transformer.NF4), 4, precision)
    assert qlora[0] < lora[0] < full[0] and qlora[1] < lora[1] < full[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_qlora_needs_less_than_lora_at_any_precision_of_the_base(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    lora = _with(training, lora=training.lora or Lora(8))
    qlora = _memory(config, _with(lora, weights_dtype=transformer.NF4), 4, precision)
    for dtype in UNQUANTISED:
        unquantised = _memory(config, _with(lora, weights_dtype=dtype), 4, precision)
        assert qlora[0] < unquantised[0] and qlora[1] < unquantised[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_an_8_bit_optimizer_needs_less_than_a_32_bit_one(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    for eight, wide in (("adamw8bit", "adamw"), ("paged_adamw8bit", "paged_adamw")):
        small = _memory(config, _with(training, optimizer=eight), 4, precision)
        large = _memory(config, _with(training, optimizer=wide), 4, precision)
        # the floor holds no optimizer state: equal
        assert small[0] < large[0] and small[1] == large[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_each_memory_saving_never_needs_more(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    for saving, off in (
        ({"optimizer_in_backward": True, "gradient_accumulation_steps": 1}, {"optimizer_in_backward": False}),
        ({"loss_chunks": 8}, {"loss_chunks": 1}),
        ({"activation_offloading": True}, {"activation_offloading": False}),
        ({"sync_each_batch": True}, {"sync_each_batch": False}),
    ):
        with_it = _memory(config, _with(training, **saving), 4, precision)
        without = _memory(config, _with(training, **off), 4, precision)
        assert _never_less(with_it, without)


@SETTINGS
@given(
    config=decoders(),
    training=trainings(),
    kind=st.sampled_from(["fsdp", "zero2"]),
    gpus=st.integers(2, 7),
    precision=PRECISIONS,
)
def test_a_sharded_jobs_share_falls_as_it_spreads_over_more_gpus(
    config: dict[str, Any], training: Training, kind: str, gpus: int, precision: str
) -> None:
    fewer = _memory(config, _with(training, sharding=transformer.shard_over(kind, gpus)), 4, precision)
    more = _memory(config, _with(training, sharding=transformer.shard_over(kind, gpus + 1)), 4, precision)
    if training.accumulates_unsharded:  # every GPU holds all the gradients: under zero2, maybe all it holds
        assert _never_less(more, fewer)
    else:  # the floor (weights and gradients) may be all one GPU holds of a one-layer model under zero2
        assert more[0] < fewer[0] and more[1] <= fewer[1]


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_sdpa_never_needs_more_than_eager(config: dict[str, Any], training: Training, precision: str) -> None:
    eager = _memory(config, _with(training, attention="eager"), 4, precision)
    sdpa = _memory(config, _with(training, attention="sdpa"), 4, precision)
    assert _never_less(sdpa, eager)


@SETTINGS
@given(config=decoders(), training=trainings(), precision=PRECISIONS)
def test_lora_dropout_and_foreach_adam_never_need_less(
    config: dict[str, Any], training: Training, precision: str
) -> None:
    if training.lora is not None:
        dropped = _with(training, lora=dataclasses.replace(training.lora, dropout=0.1))
        plain = _with(training, lora=dataclasses.replace(training.lora, dropout=0.0))
        assert _never_less(_memory(config, plain, 4, precision), _memory(config, dropped, 4, precision))
    fused = _memory(config, _with(training, optimizer="adamw_fused"), 4, precision)
    assert _never_less(fused, _memory(config, _with(training, optimizer="adamw"), 4, precision))
