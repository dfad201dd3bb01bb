"""The DLJob spec's defaults, and the settings both the operator and the simulator must hold alike.

crds/dljob.yaml writes the same spec defaults for the API server to apply;
tests/unit/api/test_api_defaults.py checks the two agree path by path, both ways. `dljob.parse` applies
them to objects the API server has not defaulted (stored under an older CRD, or built in tests).
"""

from __future__ import annotations

from collections.abc import Mapping

GPUS = 1
MAX_SLOWDOWN = 2.0  # the slowdown beside co-tenants a job accepts; 1.0: never share
PRIORITY = 0
BACKOFF_LIMIT = 3  # failed attempts before the DLJob fails
DEFAULT_PRECISION = "fp32"
# spec.framework: whose allocator holds the job's GPU memory (the memory model's runtime); PyTorch, as
# every DLJob was read before the field existed.
DEFAULT_FRAMEWORK = "pytorch"
ONNX_KEY = "model.onnx"  # spec.model.onnx.key: the ConfigMap key of the graph
HF_CONFIG_KEY = "config.json"  # spec.model.huggingface.key
OPTIMIZER = "adam"  # spec.model.huggingface.optimizer: what its state costs in memory
# Every optimizer spec.model.huggingface.optimizer names (torch's Adam, AdamW and SGD; bitsandbytes'
# 8-bit and paged AdamW; torch's fused AdamW); `transformer.OPTIMIZERS` says what each keeps.
OPTIMIZERS: tuple[str, ...] = (
    "adam",
    "adamw",
    "sgd",
    "adamw8bit",
    "paged_adamw",
    "paged_adamw8bit",
    "adamw_fused",
)
# spec.model.huggingface.weightsDtype: what the weights are loaded in. No default here: a config whose
# torch_dtype is bfloat16 or float16 is loaded in that (as the common fine-tuning recipes do), else fp32.
# nf4: QLoRA's frozen 4-bit base (LoRA only).
WEIGHTS_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp32", "nf4")
# spec.model.huggingface.sharding: how a job on several GPUs (spec.gpus) splits its model's state.
SHARDING = "none"  # every GPU holds all of it (data parallel)
SHARDINGS: tuple[str, ...] = (SHARDING, "fsdp", "zero2")
LOSS_CHUNKS = 1  # spec.model.huggingface.lossChunks: the loss over the whole sequence at once
# spec.model.huggingface.attention: PyTorch's and Hugging Face's default, which stores no T×T scores.
ATTENTION = "sdpa"
ATTENTIONS: tuple[str, ...] = (ATTENTION, "eager")
GRACE_PERIOD_S = 30  # spec.migration.gracePeriodSeconds: to checkpoint after SIGTERM
BATCH_SIZE = 1  # for objects stored without the schema (which requires spec.batchSize)

# Every default the CRD declares, by its path below `spec`.
SPEC: Mapping[str, object] = {
    "gpus": GPUS,
    "maxSlowdown": MAX_SLOWDOWN,
    "priority": PRIORITY,
    "backoffLimit": BACKOFF_LIMIT,
    "precision": DEFAULT_PRECISION,
    "framework": DEFAULT_FRAMEWORK,
    "model.onnx.key": ONNX_KEY,
    "model.huggingface.key": HF_CONFIG_KEY,
    "model.huggingface.optimizer": OPTIMIZER,
    "model.huggingface.gradientCheckpointing": False,
    "model.huggingface.lora.dropout": 0,
    "model.huggingface.gradientAccumulationSteps": 1,
    "model.huggingface.syncEachBatch": False,
    "model.huggingface.attention": ATTENTION,
    "model.huggingface.optimizerInBackward": False,
    "model.huggingface.lossChunks": LOSS_CHUNKS,
    "model.huggingface.activationOffloading": False,
    "model.huggingface.sharding": SHARDING,
    "migration.allowed": False,
    "migration.gracePeriodSeconds": GRACE_PERIOD_S,
    "simulation.fail": False,
}

# After this long in one co-tenancy a job's reported rate belongs to it (the agent's rate window has
# forgotten the previous one): the operator's telemetry attributes a rate then, and the simulator's
# online learning reports a state then, so both learn the same lessons at the same moments.
SETTLED_S = 60.0
