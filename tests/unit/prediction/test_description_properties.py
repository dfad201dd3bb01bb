"""Properties of the ways a job is described (issue 26): more input or longer sequences never cost less,
LoRA never costs more than full fine-tuning, checkpointing never keeps more activations, and a shape a
graph cannot take is refused the same way every time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horus_operator.prediction import artifacts, catalog, features, reshape, transformer
from horus_operator.prediction.transformer import Lora, Training

MEMORY = artifacts.load().memory
PRECISIONS = st.sampled_from(["fp32", "amp", "bf16"])


def _memory(profile: Any, batch: int, precision: str) -> float:
    return MEMORY.memory_mib(features.at_batch(profile, batch), precision)


@st.composite
def decoders(draw: st.DrawFn) -> dict[str, Any]:
    """Llama-style configs of every size class, grouped-query attention included."""
    kv_heads = draw(st.sampled_from([1, 2, 4]))
    heads = kv_heads * draw(st.integers(1, 4))
    return {
        "model_type": draw(st.sampled_from(["llama", "mistral", "qwen2"])),
        "hidden_size": heads * draw(st.sampled_from([16, 32, 64])),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": draw(st.integers(1, 6)),
        "intermediate_size": draw(st.integers(8, 512)),
        "vocab_size": draw(st.integers(16, 4096)),
        "tie_word_embeddings": draw(st.booleans()),
    }


SETTINGS = settings(max_examples=40, deadline=None)


@SETTINGS
@given(config=decoders(), tokens=st.integers(1, 256), more=st.integers(1, 256), precision=PRECISIONS)
def test_a_longer_sequence_costs_more_flops_and_memory(
    config: dict[str, Any], tokens: int, more: int, precision: str
) -> None:
    short = transformer.describe(config, Training(tokens)).profile
    long = transformer.describe(config, Training(tokens + more)).profile
    assert long["flops_per_sample"] > short["flops_per_sample"]
    assert long["activation_bytes_per_sample"] > short["activation_bytes_per_sample"]
    # never less; the same where the optimizer's step, not the activations, sets the peak
    assert _memory(long, 2, precision) >= _memory(short, 2, precision)
    assert long["params"] == short["params"]


@SETTINGS
@given(config=decoders(), rank=st.integers(1, 64), all_linear=st.booleans(), precision=PRECISIONS)
def test_lora_trains_fewer_parameters_and_needs_less_memory_where_its_rank_is_small(
    config: dict[str, Any], rank: int, all_linear: bool, precision: str
) -> None:
    # What LoRA saves is the frozen weights' gradients and optimizer state; what it adds, its adapters
    # and the rank-wide activations x·Aᵀ kept for backward. Once rank × tokens nears the weights
    # (tiny widths, long batches), it saves nothing, here as on a GPU: the property is for rank at most
    # 1/16 of the width at 256 tokens a step.
    config = {**config, "hidden_size": config["num_attention_heads"] * 256}
    rank = min(rank, config["hidden_size"] // 16)
    targets = ("all-linear",) if all_linear else ()
    full = transformer.describe(config, Training(64))
    lora = transformer.describe(config, Training(64, lora=Lora(rank, targets)))
    assert lora.trainable_params > 0
    assert lora.trainable_params < full.trainable_params
    assert lora.profile["trainable_param_bytes"] == 4 * lora.trainable_params
    assert _memory(lora.profile, 4, precision) < _memory(full.profile, 4, precision)
    floors = [MEMORY.floor_mib(features.at_batch(job.profile, 4), precision) for job in (lora, full)]
    assert floors[0] < floors[1]


@SETTINGS
@given(config=decoders(), tokens=st.integers(1, 256), precision=PRECISIONS)
def test_checkpointing_never_keeps_more_activations(
    config: dict[str, Any], tokens: int, precision: str
) -> None:
    plain = transformer.describe(config, Training(tokens)).profile
    kept = transformer.describe(config, Training(tokens, gradient_checkpointing=True)).profile
    assert kept["kept_activation_bytes_per_sample"] <= plain["activation_bytes_per_sample"]
    assert _memory(kept, 4, precision) <= _memory(plain, 4, precision)
    if config["num_hidden_layers"] > 1:  # with one layer there is nothing to recompute
        assert kept["kept_activation_bytes_per_sample"] < plain["activation_bytes_per_sample"]


IMAGE_NETS = ["resnet18-imagenet", "resnet50", "mobilenet_v2", "vgg16", "densenet121", "efficientnet_b0"]


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(IMAGE_NETS), side=st.integers(1, 8), more=st.integers(1, 4), precision=PRECISIONS)
def test_a_larger_image_costs_more_flops_and_memory(name: str, side: int, more: int, precision: str) -> None:
    small = catalog.reshaped_profile(name, [3, 32 * side, 32 * side]) or catalog.entry(name)["profile"]
    large_side = 32 * (side + more)
    large = catalog.reshaped_profile(name, [3, large_side, large_side]) or catalog.entry(name)["profile"]
    assert large["flops_per_sample"] > small["flops_per_sample"]
    assert large["activation_bytes_per_sample"] > small["activation_bytes_per_sample"]
    assert _memory(large, 16, precision) > _memory(small, 16, precision)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["vgg16", "inception_v3", "resnet50"]), side=st.integers(1, 15))
def test_a_refused_shape_is_refused_every_time_and_stores_nothing(name: str, side: int) -> None:
    """An image too small for the net (VGG's five pools need 32 pixels, Inception v3 75) or with the
    wrong channels: the same clear error each time, and the next good shape is unaffected."""
    shape = [3, side, side] if name != "resnet50" else [side + 3, 32, 32]
    for _ in range(2):
        with pytest.raises(reshape.ShapeError) as refused:
            catalog.reshaped_profile(name, shape)
        assert "too small" in str(refused.value) or "input channels" in str(refused.value)
    assert catalog.reshaped_profile(name, [3, 96, 96]) is not None
