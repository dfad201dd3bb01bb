"""The memory-saving recipes of issue 45 counted from a config (`prediction.transformer`): QLoRA's NF4
base, 8-bit and paged optimizers, optimizer-in-backward, a chunked loss, activation offloading and
FSDP/ZeRO shards, each checked against its bytes worked out by hand; and a job that says none of them
keeps the description and key it had before they could be said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from horus_operator.prediction import artifacts, features, transformer
from horus_operator.prediction.transformer import Lora, Training

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "huggingface"
LLAMA_2_7B = json.loads((EXAMPLES / "llama-2-7b.json").read_text())
LLAMA_3_2_3B = json.loads((EXAMPLES / "llama-3.2-3b.json").read_text())
LLAMA_160M = json.loads((EXAMPLES / "llama-160m.json").read_text())
# Llama-2-7B by hand: each layer's linear weights (q, k, v, o 4,096²; gate, up, down 4,096 × 11,008)
# and its two RMSNorm scales; the root FSDP gathers (embeddings, LM head, final norm).
LAYER_LINEARS = 4 * 4096 * 4096 + 3 * 4096 * 11008
LAYER_PARAMS = LAYER_LINEARS + 2 * 4096
ROOT_PARAMS = 2 * 32000 * 4096 + 4096
PARAMS = 6_738_415_616
assert 32 * LAYER_PARAMS + ROOT_PARAMS == PARAMS


def _profile(config: dict[str, Any], tokens: int, **training: Any) -> dict[str, float]:
    return dict(transformer.describe(config, Training(sequence_length=tokens, **training)).profile)


def test_qlora_holds_the_layers_linear_weights_in_nf4_with_their_constants() -> None:
    qlora = _profile(LLAMA_2_7B, 512, lora=Lora(8), weights_dtype="nf4")
    lora = _profile(LLAMA_2_7B, 512, lora=Lora(8), weights_dtype="bf16")
    adapters = 32 * 8 * (2 * 4096 + 2 * 4096)  # PEFT's default q_proj and v_proj, 4,096 → 4,096
    # 4 bits, and 0.127 bits for the constants after double quantisation (QLoRA §3)
    assert pytest.approx((4 + 0.127) / 8, abs=1e-4) == transformer.NF4_BYTES
    nf4 = transformer.NF4_BYTES * 32 * LAYER_LINEARS
    rest = 2 * (PARAMS - 32 * LAYER_LINEARS + adapters)  # embeddings, norms, head, adapters in bf16
    dequantised = 2 * 4096 * 11008  # the largest linear weight, in bf16 for its matmul
    assert qlora["weight_bytes"] == pytest.approx(nf4 + rest + dequantised)
    assert qlora["weight_bytes"] / 2**30 == pytest.approx(3.69, abs=0.01)
    # the adapters train in bf16 as under LoRA on a bf16 base: their gradients and Adam's moments alike
    for name in ("trainable_param_bytes", "optimizer_state_bytes", "kept_activation_bytes_per_sample"):
        assert qlora[name] == lora[name]


@pytest.mark.parametrize(
    ("optimizer", "per_value"),
    [
        ("adamw", 2 * 2),  # two moments in the parameters' bf16 (torch.optim: zeros_like)
        ("sgd", 2),
        ("adamw8bit", 2 * (1 + 4 / 256)),  # bitsandbytes: 1 byte each, an FP32 absmax per 256
        ("paged_adamw8bit", 2 * (1 + 4 / 256)),  # paged: the same bytes, counted as on the GPU
        ("paged_adamw", 2 * 4),  # bitsandbytes' 32-bit state is FP32 whatever the parameters' dtype
    ],
)
def test_each_optimizer_keeps_its_state_per_trained_value(optimizer: str, per_value: float) -> None:
    described = transformer.describe(LLAMA_3_2_3B, Training(512, optimizer=optimizer))
    assert described.profile["optimizer_state_bytes"] == pytest.approx(per_value * described.trainable_params)


def test_every_optimizer_the_spec_names_is_counted() -> None:
    from horus_operator.api import defaults

    assert tuple(transformer.OPTIMIZER_STATES) == defaults.OPTIMIZERS


def test_optimizer_in_backward_holds_one_parameters_gradient() -> None:
    full = _profile(LLAMA_3_2_3B, 512, optimizer_in_backward=True)
    # the largest trained parameter of a full fine-tune: the token embedding (tied to the head)
    assert full["gradient_bytes"] == 2 * 128256 * 3072
    assert full["trainable_param_bytes"] == 2 * 3_212_749_824  # what is trained is unchanged
    lora = _profile(LLAMA_3_2_3B, 512, lora=Lora(8), optimizer_in_backward=True)
    assert lora["gradient_bytes"] == 2 * 8 * 3072  # one adapter matrix: rank × 3,072
    assert "gradient_bytes" not in _profile(LLAMA_3_2_3B, 512)


def test_a_chunked_loss_holds_one_chunks_fp32_logits() -> None:
    def loss(tokens: int, **training: Any) -> float:
        return _profile(LLAMA_3_2_3B, tokens, **training)["fp32_activation_bytes_per_sample"]

    vocab = 128256
    assert loss(2048) == 2 * 4 * 2048 * vocab
    assert loss(2048, loss_chunks=8) == 2 * 4 * 256 * vocab
    assert loss(2049, loss_chunks=8) == 2 * 4 * 257 * vocab  # torch.chunk's chunks: ceil(tokens / chunks)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_offloading_keeps_two_layers_activations_on_the_gpu(checkpointing: bool) -> None:
    # 12 layers offloaded keep on the GPU what 2 layers (3 under checkpointing: the recomputed one and
    # two inputs) hold without offloading
    offloaded = _profile(LLAMA_160M, 1024, gradient_checkpointing=checkpointing, activation_offloading=True)
    layers = 3 if checkpointing else 2
    kept = _profile({**LLAMA_160M, "num_hidden_layers": layers}, 1024, gradient_checkpointing=checkpointing)
    assert offloaded["kept_activation_bytes_per_sample"] == kept["kept_activation_bytes_per_sample"]


def test_fsdp_holds_a_share_and_what_it_gathers() -> None:
    alone = _profile(LLAMA_2_7B, 512)
    fsdp = _profile(LLAMA_2_7B, 512, sharding=transformer.shard_over("fsdp", 4))
    # bf16: a quarter of the weights, the root unit and two layers gathered whole
    assert fsdp["weight_bytes"] == pytest.approx(2 * PARAMS / 4 + 2 * ROOT_PARAMS + 2 * 2 * LAYER_PARAMS)
    # a quarter of the gradients, and the root's and one layer's whole until reduce-scattered
    assert fsdp["gradient_bytes"] == pytest.approx(2 * PARAMS / 4 + 2 * (ROOT_PARAMS + LAYER_PARAMS))
    assert fsdp["optimizer_state_bytes"] == pytest.approx(alone["optimizer_state_bytes"] / 4)
    zero2 = _profile(LLAMA_2_7B, 512, sharding=transformer.shard_over("zero2", 4))
    assert zero2["weight_bytes"] == alone["weight_bytes"] == 2 * PARAMS
    assert zero2["gradient_bytes"] == fsdp["gradient_bytes"]
    # one GPU, or no sharding, holds everything: the description and its key are the unsharded ones
    for unsharded in (transformer.shard_over("fsdp", 1), transformer.shard_over("none", 8)):
        same = transformer.describe(LLAMA_2_7B, Training(512, sharding=unsharded))
        assert same.profile == alone
    assert transformer.shard_over("none", 8) == transformer.Sharding()


def test_fp32_weights_under_fsdp_are_the_gpus_share() -> None:
    fsdp = _profile(LLAMA_2_7B, 512, weights_dtype="fp32", sharding=transformer.shard_over("fsdp", 8))
    assert fsdp["weight_bytes"] == pytest.approx(4 * PARAMS / 8 + 4 * ROOT_PARAMS + 2 * 4 * LAYER_PARAMS)


def test_a_job_that_saves_nothing_keeps_its_key() -> None:
    # The key Llama-3.2-3B at 2,048 tokens had at f8b3a63 (its learned corrections are filed under it)
    plain = transformer.describe(LLAMA_3_2_3B, Training(2048))
    assert plain.key == "c9fd8f32d881ad64"
    assert transformer.describe(LLAMA_3_2_3B, Training(2048, loss_chunks=8)).key != plain.key


def test_the_memory_model_reads_the_gpus_share() -> None:
    model = artifacts.load().memory
    recipe = {"lora": Lora(16, ("q_proj", "k_proj", "v_proj")), "gradient_checkpointing": True}
    config = json.loads((EXAMPLES / "llama-3.1-70b.json").read_text())
    shares = [
        features.at_batch(_profile(config, 2048, sharding=transformer.shard_over("fsdp", gpus), **recipe), 2)
        for gpus in (1, 8)
    ]
    # 70B in bf16 (141 GB) on one GPU; an eighth of it, and what FSDP gathers, on each of eight
    assert model.memory_mib(shares[0], "bf16") > 140_000
    assert model.memory_mib(shares[1], "bf16") < 40_000
    assert model.floor_mib(shares[1], "bf16") < model.floor_mib(shares[0], "bf16") / 4


def test_lora_dropout_keeps_each_adapters_dropped_input_and_its_mask() -> None:
    plain = _profile(LLAMA_2_7B, 512, lora=Lora(8))
    dropped = _profile(LLAMA_2_7B, 512, lora=Lora(8, dropout=0.05))
    # PEFT's default q_proj and v_proj: each keeps dropout(x), 4,096 values a token (FP32 in the graph,
    # halved under bf16), and torch's one-byte mask (two graph bytes, one under bf16)
    per_adapter = 512 * 4096 * (4 + 2)
    extra = dropped["kept_activation_bytes_per_sample"] - plain["kept_activation_bytes_per_sample"]
    assert extra == pytest.approx(32 * 2 * per_adapter)
    # no dropout, no change: the description and key of a LoRA job before dropout could be said
    assert transformer.describe(LLAMA_2_7B, Training(512, lora=Lora(8, dropout=0.0))).key == (
        transformer.describe(LLAMA_2_7B, Training(512, lora=Lora(8))).key
    )
    assert transformer.describe(LLAMA_2_7B, Training(512, lora=Lora(8, dropout=0.1))).key != (
        transformer.describe(LLAMA_2_7B, Training(512, lora=Lora(8))).key
    )


def test_foreach_adam_steps_with_one_copy_of_what_it_trains() -> None:
    adamw = _profile(LLAMA_2_7B, 512, optimizer="adamw")
    assert adamw["optimizer_step_bytes"] == 2 * PARAMS  # sqrt of every second moment, in bf16
    sharded = _profile(LLAMA_2_7B, 512, optimizer="adamw", sharding=transformer.shard_over("fsdp", 4))
    assert sharded["optimizer_step_bytes"] == pytest.approx(2 * PARAMS / 4)  # each GPU steps its shard
    for in_place in ({"optimizer": "adamw_fused"}, {"optimizer": "sgd"}, {"optimizer_in_backward": True}):
        assert "optimizer_step_bytes" not in _profile(LLAMA_2_7B, 512, **in_place)


def test_the_step_scratch_takes_the_place_of_freed_activations() -> None:
    model = artifacts.load().memory
    job = features.at_batch(_profile(LLAMA_2_7B, 512, gradient_checkpointing=True), 1)
    without = {name: value for name, value in job.items() if name != "optimizer_step_bytes"}
    activations = model.memory_mib({**without, "optimizer_step_bytes": 0.0}, "bf16")
    # 13.5 GB of scratch against a checkpointed batch's few hundred MB: the step sets the peak
    step_only = model.memory_mib(
        {**without, "kept_activation_bytes_per_batch": 0.0, "fp32_activation_bytes_per_batch": 0.0}, "bf16"
    )
    assert model.memory_mib(job, "bf16") == pytest.approx(step_only + 2 * PARAMS / 2**20)
    assert model.memory_mib(job, "bf16") > activations
    small = {**without, "optimizer_step_bytes": 1.0}
    assert model.memory_mib(small, "bf16") == pytest.approx(activations)


def test_fsdp_accumulating_unsharded_holds_every_gradient() -> None:
    fsdp = transformer.shard_over("fsdp", 4)
    synced = _profile(LLAMA_2_7B, 512, sharding=fsdp, gradient_accumulation_steps=4, sync_each_batch=True)
    assert synced == _profile(LLAMA_2_7B, 512, sharding=fsdp)
    no_sync = _profile(LLAMA_2_7B, 512, sharding=fsdp, gradient_accumulation_steps=4)
    # FSDP's no_sync(): every GPU sums the whole model's gradients, unsharded, until the last micro-batch
    assert no_sync.get("gradient_bytes", no_sync["trainable_param_bytes"]) == 2 * PARAMS
    assert no_sync["weight_bytes"] == synced["weight_bytes"]
    assert no_sync["optimizer_state_bytes"] == synced["optimizer_state_bytes"]
