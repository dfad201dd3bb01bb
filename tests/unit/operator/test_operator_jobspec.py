from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from operator_builders import gpu_node

from horus_operator.api import dljob
from horus_operator.operator import cluster_view
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.jobs.feasibility import as_invalid
from horus_operator.placement.feasibility import Capacity, unsatisfiable
from horus_operator.placement.types import ClusterSnapshot
from horus_operator.prediction.api import JobPrediction, UnknownModelError, Workload
from horus_operator.prediction.features import PROFILE_NAMES
from horus_operator.testing.builders import DLJobBuilder

CATALOG = {"resnet50": "resnet50", "ResNet-50": "resnet50"}


def _canonical(name: str) -> str:
    if name not in CATALOG:
        raise UnknownModelError(f"unknown model {name!r}")
    return CATALOG[name]


def _resolver(files: dict[tuple[str, str, str], bytes] | None = None) -> jobspec.WorkloadResolver:
    def read(namespace: str, name: str, key: str) -> bytes:
        try:
            return (files or {})[(namespace, name, key)]
        except KeyError as error:
            raise LookupError(f"ConfigMap {namespace}/{name}") from error

    def parse_onnx(data: bytes, batch_size: int) -> dict[str, float]:
        if not data.startswith(b"ONNX"):
            raise ValueError("not a protobuf")
        return {"flops": 1e9 * batch_size}

    return jobspec.WorkloadResolver(canonical_model=_canonical, read_onnx=read, onnx_features=parse_onnx)


def test_defaults_match_the_crd() -> None:
    job = dljob.parse(DLJobBuilder.stored("cnn").obj())
    assert (job.gpus, job.max_slowdown, job.priority, job.backoff_limit) == (1, 2.0, 0, 3)
    assert job.key == "team-a/cnn"


def test_catalog_names_are_canonicalised() -> None:
    job = dljob.parse(DLJobBuilder.stored("cnn").model(architecture="ResNet-50").obj())
    assert _resolver().workload(job) == Workload(model="resnet50", batch_size=32)


def test_unknown_architecture_names_the_field() -> None:
    job = dljob.parse(DLJobBuilder.stored("cnn").model(architecture="nosuchnet").obj())
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver().workload(job)
    assert caught.value.field_path == "spec.model.architecture"
    assert caught.value.value == "nosuchnet"


def test_precision_defaults_to_fp32_and_reaches_the_workload() -> None:
    assert _resolver().workload(dljob.parse(DLJobBuilder.stored("cnn").obj())).precision == "fp32"
    job = dljob.parse(DLJobBuilder.stored("cnn").spec(precision="amp").obj())
    assert _resolver().workload(job) == Workload(model="resnet50", batch_size=32, precision="amp")
    features = dljob.parse(
        DLJobBuilder.stored("net").model(features={"flops": 5e9}).spec(precision="bf16").obj()
    )
    assert _resolver().workload(features).precision == "bf16"


def test_unknown_precision_names_the_field_before_reading_the_graph() -> None:
    """For objects that bypass the schema's enum: no ConfigMap read, the field and value named."""
    job = dljob.parse(
        DLJobBuilder.stored("net").model(onnx={"configMap": "absent"}).spec(precision="fp16").obj()
    )
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver().workload(job)
    assert (caught.value.field_path, caught.value.value) == ("spec.precision", "fp16")
    assert str(caught.value).startswith("spec.precision='fp16': expected one of fp32, amp, bf16")


def test_framework_defaults_to_pytorch_and_reaches_the_workload() -> None:
    assert _resolver().workload(dljob.parse(DLJobBuilder.stored("cnn").obj())).framework == "pytorch"
    job = dljob.parse(DLJobBuilder.stored("cnn").spec(framework="tensorflow").obj())
    assert _resolver().workload(job) == Workload(model="resnet50", batch_size=32, framework="tensorflow")


def test_unknown_framework_names_the_field_before_reading_the_graph() -> None:
    job = dljob.parse(
        DLJobBuilder.stored("net").model(onnx={"configMap": "absent"}).spec(framework="jax").obj()
    )
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver().workload(job)
    assert (caught.value.field_path, caught.value.value) == ("spec.framework", "jax")
    assert str(caught.value).startswith("spec.framework='jax': expected one of pytorch, tensorflow")


def test_onnx_from_a_config_map_gives_keyed_custom_features() -> None:
    files = {("team-a", "graphs", "model.onnx"): b"ONNX..."}
    job = dljob.parse(DLJobBuilder.stored("net").model(onnx={"configMap": "graphs"}).obj())
    workload = _resolver(files).workload(job)
    assert workload.model == jobspec.CUSTOM_MODEL
    assert workload.features == {"flops": 32e9}
    assert workload.features_key.startswith("onnx:")


@pytest.mark.parametrize(
    ("files", "reason"),
    [({}, "not found"), ({("team-a", "graphs", "model.onnx"): b"garbage"}, "unreadable ONNX")],
)
def test_missing_or_unreadable_onnx_names_the_field(files: dict, reason: str) -> None:
    job = dljob.parse(DLJobBuilder.stored("net").model(onnx={"configMap": "graphs"}).obj())
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver(files).workload(job)
    assert caught.value.field_path == "spec.model.onnx"
    assert reason in str(caught.value)


def test_precomputed_features_are_used_as_given() -> None:
    job = dljob.parse(DLJobBuilder.stored("net").model(features={"flops": 5e9, "params": 1e6}).obj())
    workload = _resolver().workload(job)
    assert workload.features == {"flops": 5e9, "params": 1e6}
    assert workload.features_key.startswith("features:")


def _snapshot() -> Capacity:
    nodes = [cluster_view.view(gpu_node("v100-node", count=4, memory_mib=16384))]
    return Capacity.of(cluster_view.build_snapshot(nodes, [], now=0.0))


def _predict_memory(memory_mib: float) -> Callable[[Workload, str], JobPrediction]:
    return lambda workload, gpu: JobPrediction(utilization=0.5, memory_mib=memory_mib)


def _verdict(
    job: dljob.JobSpec, workload: Workload, capacity: Capacity, memory_mib: float
) -> dljob.InvalidJob | None:
    problem = unsatisfiable(jobspec.request(job, workload, 0.0), capacity, _predict_memory(memory_mib))
    return None if problem is None else as_invalid(job, problem)


def test_more_gpus_than_any_node_has_is_unsatisfiable() -> None:
    job = dljob.parse(DLJobBuilder.stored("big").spec(gpus=8).obj())
    problem = _verdict(job, Workload("resnet50", 32), _snapshot(), 1000)
    assert problem is not None and (problem.field_path, problem.value) == ("spec.gpus", 8)


def test_more_memory_than_any_gpu_has_is_unsatisfiable() -> None:
    job = dljob.parse(DLJobBuilder.stored("huge").spec(batchSize=4096).obj())
    problem = _verdict(job, Workload("resnet50", 4096), _snapshot(), 40000)
    assert problem is not None and problem.field_path == "spec.batchSize"
    assert _verdict(job, Workload("resnet50", 32), _snapshot(), 8000) is None


def test_a_model_of_ones_own_too_large_for_any_gpu_names_its_size_too() -> None:
    job = dljob.parse(DLJobBuilder.stored("own").model(features={"param_bytes": 1e15}).obj())
    problem = _verdict(job, Workload("custom", 32), _snapshot(), 1e9)
    assert problem is not None and problem.field_path == "spec.batchSize"
    assert problem.reason.endswith("the model's own size (spec.model.features) counts too")


def test_an_empty_cluster_judges_nothing() -> None:
    job = dljob.parse(DLJobBuilder.stored("big").spec(gpus=8).obj())
    assert _verdict(job, Workload("resnet50", 32), Capacity.of(ClusterSnapshot(nodes=())), 1e9) is None


@pytest.mark.parametrize("value", [-1.0, float("inf"), float("nan")])
def test_features_must_be_finite_counts(value: float) -> None:
    job = dljob.parse(DLJobBuilder.stored("f").model(features={"params": 1.0, "param_bytes": value}).obj())
    with pytest.raises(dljob.InvalidJob) as invalid:
        _resolver().workload(job)
    assert invalid.value.field_path == "spec.model.features.param_bytes"


GPT2_SMALL = {
    "model_type": "gpt2",
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "vocab_size": 1000,
    "n_positions": 128,
}


def _hf_job(**huggingface: Any) -> dljob.JobSpec:
    return dljob.parse(DLJobBuilder.stored("llm").model(huggingface=huggingface).obj())


def test_a_hugging_face_config_inline_or_in_a_config_map_gives_the_same_counted_workload() -> None:
    inline = _resolver().workload(_hf_job(config=GPT2_SMALL, sequenceLength=128))
    files = {("team-a", "configs", "config.json"): json.dumps(GPT2_SMALL).encode()}
    from_map = _hf_job(configMap="configs", sequenceLength=128)
    assert from_map.config_map_field == "spec.model.huggingface.configMap"
    assert _hf_job(config=GPT2_SMALL, sequenceLength=128).config_map_field is None
    read = _resolver(files).workload(from_map)
    assert inline.model == read.model == jobspec.CUSTOM_MODEL
    assert inline.features == read.features and inline.features_key == read.features_key
    assert inline.features_key.startswith("huggingface:")
    assert inline.features is not None and inline.features["params"] > 0


def test_lora_and_checkpointing_reach_the_workloads_memory_terms() -> None:
    lora = _resolver().workload(
        _hf_job(config=GPT2_SMALL, sequenceLength=128, lora={"rank": 4}, gradientCheckpointing=True)
    )
    full = _resolver().workload(_hf_job(config=GPT2_SMALL, sequenceLength=128))
    assert lora.features is not None and full.features is not None
    assert lora.features["trainable_param_bytes"] < full.features["trainable_param_bytes"]
    assert "kept_activation_bytes_per_sample" in lora.features
    assert lora.features_key != full.features_key


def test_weights_dtype_and_attention_reach_the_workloads_memory_terms() -> None:
    def features(**storage: str) -> dict[str, float]:
        workload = _resolver().workload(_hf_job(config=GPT2_SMALL, sequenceLength=128, **storage))
        assert workload.features is not None
        return dict(workload.features)

    default, half = features(), features(weightsDtype="bf16")
    assert "weight_bytes" not in default  # GPT-2's config states no half dtype: FP32, counted as before
    assert half["weight_bytes"] == default["param_bytes"] / 2
    eager = features(attention="eager")
    # Eager keeps what the graph holds (no term of its own): SDPA less, no T x T scores.
    assert default["kept_activation_bytes_per_sample"] < eager["activation_bytes_per_sample"]
    assert "kept_activation_bytes_per_sample" not in eager


def test_sharding_splits_the_model_over_the_jobs_gpus() -> None:
    deeper = {**GPT2_SMALL, "n_layer": 12}  # FSDP gathers two layers and the embeddings whole

    def features(gpus: int, **huggingface: Any) -> dict[str, float]:
        body = DLJobBuilder.stored("llm").model(
            huggingface={"config": deeper, "sequenceLength": 128, **huggingface}
        )
        workload = _resolver().workload(dljob.parse(body.spec(gpus=gpus).obj()))
        assert workload.features is not None
        return {**workload.features, "key": hash(workload.features_key)}

    alone, replicated = features(1), features(4)
    assert replicated == alone  # data parallel: every GPU holds all of it, and the job keeps its key
    fsdp = features(4, sharding="fsdp")
    assert fsdp["optimizer_state_bytes"] == alone["optimizer_state_bytes"] / 4
    assert fsdp["weight_bytes"] < alone["param_bytes"]
    assert fsdp["key"] != alone["key"]
    assert features(1, sharding="fsdp") == alone  # one GPU: nothing to shard
    no_sync = features(4, sharding="fsdp", gradientAccumulationSteps=4)
    synced = features(4, sharding="fsdp", gradientAccumulationSteps=4, syncEachBatch=True)
    assert no_sync.get("gradient_bytes", no_sync["trainable_param_bytes"]) > synced["gradient_bytes"]


def test_the_memory_savings_reach_the_workloads_memory_terms() -> None:
    deeper = {**GPT2_SMALL, "n_layer": 4}  # offloading keeps two layers' activations on the GPU

    def features(**huggingface: Any) -> dict[str, float]:
        workload = _resolver().workload(_hf_job(config=deeper, sequenceLength=128, **huggingface))
        assert workload.features is not None
        return dict(workload.features)

    plain = features()
    saving = features(
        optimizer="adamw8bit", optimizerInBackward=True, lossChunks=8, activationOffloading=True
    )
    assert saving["optimizer_state_bytes"] < plain["optimizer_state_bytes"]
    assert saving["gradient_bytes"] < plain["trainable_param_bytes"]
    assert saving["fp32_activation_bytes_per_sample"] == plain["fp32_activation_bytes_per_sample"] / 8
    assert saving["kept_activation_bytes_per_sample"] < plain["kept_activation_bytes_per_sample"]
    qlora = features(lora={"rank": 4}, weightsDtype="nf4")
    assert qlora["weight_bytes"] < plain["param_bytes"] / 2
    kept = "kept_activation_bytes_per_sample"
    assert features(lora={"rank": 4, "dropout": 0.05})[kept] > features(lora={"rank": 4})[kept]
    assert features(optimizer="adamw")["optimizer_step_bytes"] > 0
    assert "optimizer_step_bytes" not in features(optimizer="adamw_fused")


@pytest.mark.parametrize(
    ("huggingface", "field_path"),
    [
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "weightsDtype": "int4"},
            "spec.model.huggingface.weightsDtype",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "weightsDtype": "nf4"},  # QLoRA without LoRA
            "spec.model.huggingface.weightsDtype",
        ),
        ({"config": GPT2_SMALL, "sequenceLength": 8, "lossChunks": 0}, "spec.model.huggingface.lossChunks"),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "lora": {"rank": 4, "dropout": 1.0}},
            "spec.model.huggingface.lora.dropout",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "lora": {"rank": 4, "dropout": "0.1"}},
            "spec.model.huggingface.lora.dropout",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "optimizerInBackward": True}
            | {"gradientAccumulationSteps": 2},
            "spec.model.huggingface.gradientAccumulationSteps",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "sharding": "zero3"},
            "spec.model.huggingface.sharding",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "optimizerInBackward": "yes"},
            "spec.model.huggingface.optimizerInBackward",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "attention": "flash"},
            "spec.model.huggingface.attention",
        ),
        (
            {"config": {**GPT2_SMALL, "n_head": 3}, "sequenceLength": 128},
            "spec.model.huggingface.config.n_head",
        ),
        ({"config": {"model_type": "t5"}, "sequenceLength": 128}, "spec.model.huggingface.config.model_type"),
        ({"config": GPT2_SMALL, "sequenceLength": 129}, "spec.model.huggingface.sequenceLength"),
        ({"config": GPT2_SMALL}, "spec.model.huggingface.sequenceLength"),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "lora": {"rank": "x"}},
            "spec.model.huggingface.lora.rank",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "lora": {"rank": 2, "targetModules": ["q_proj"]}},
            "spec.model.huggingface.lora.targetModules",
        ),
        (
            {"config": GPT2_SMALL, "sequenceLength": 8, "optimizer": "lion"},
            "spec.model.huggingface.optimizer",
        ),
        ({"config": [1], "sequenceLength": 8}, "spec.model.huggingface.config"),
        ({"sequenceLength": 8}, "spec.model.huggingface"),
        ({"configMap": "absent", "sequenceLength": 8}, "spec.model.huggingface.configMap"),
    ],
)
def test_what_the_config_route_cannot_count_names_the_field(huggingface: dict, field_path: str) -> None:
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver().workload(_hf_job(**huggingface))
    assert caught.value.field_path == field_path


def test_a_config_map_that_is_not_json_names_the_field() -> None:
    files = {("team-a", "configs", "config.json"): b"\xff not json"}
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver(files).workload(_hf_job(configMap="configs", sequenceLength=8))
    assert caught.value.field_path == "spec.model.huggingface.configMap"
    assert "not a JSON config" in str(caught.value)


def test_a_described_model_too_large_for_any_gpu_names_its_description() -> None:
    job = _hf_job(config=GPT2_SMALL, sequenceLength=128)
    problem = _verdict(job, _resolver().workload(job), _snapshot(), memory_mib=10**6)
    assert problem is not None and "spec.model.huggingface" in str(problem)


def _shaped(name: str, shape: tuple[int, ...], batch_size: int) -> Workload:
    """A stand-in for catalog.workload_at_shape: 3×16×16 is too small."""
    if shape == (3, 16, 16):
        raise ValueError("MaxPool node 'pool': the input is too small")
    features = {**dict.fromkeys(PROFILE_NAMES, 1.0), "flops_per_sample": float(shape[-1] * shape[-2])}
    return Workload(f"{name}@x", batch_size, features, f"shape:{name}:x")


def _shape_resolver() -> jobspec.WorkloadResolver:
    return jobspec.WorkloadResolver(_canonical, _resolver().read_onnx, _resolver().onnx_features, _shaped)


def _shape_job(shape: object, **model: Any) -> dljob.JobSpec:
    return dljob.parse(
        DLJobBuilder.stored("cifar").model(**(model or {"architecture": "ResNet-50"}), inputShape=shape).obj()
    )


def test_an_input_shape_counts_the_catalog_model_again_under_its_own_name_and_key() -> None:
    job = _shape_job([3, 32, 32])
    assert job.resolved_off_loop
    workload = _shape_resolver().workload(job)
    assert workload == Workload("resnet50@x", 32, features_key="shape:resnet50:x")
    assert workload.features is not None and workload.features["flops_per_sample"] == 1024.0


@pytest.mark.parametrize(
    ("shape", "model", "reason"),
    [
        ([3, 16, 16], {}, "resnet50 cannot take it: MaxPool node 'pool': the input is too small"),
        ([0, 32], {}, "1 to 4 sizes"),
        ([1, 2, 3, 4, 5], {}, "1 to 4 sizes"),
        (["3", 32, 32], {}, "1 to 4 sizes"),
        ([3, 32, 32], {"onnx": {"configMap": "g"}}, "applies to spec.model.architecture"),
    ],
)
def test_an_input_shape_that_cannot_be_counted_names_the_field(
    shape: object, model: dict[str, Any], reason: str
) -> None:
    with pytest.raises(dljob.InvalidJob) as caught:
        _shape_resolver().workload(_shape_job(shape, **model))
    assert caught.value.field_path == "spec.model.inputShape"
    assert reason in str(caught.value)


SECRET = "db-password=hunter2"


@pytest.mark.parametrize(
    ("config", "named", "reason"),
    [
        ({"model_type": SECRET}, "config.model_type", jobspec.CONFIG_MAP_REASONS["config.model_type"]),
        ({**GPT2_SMALL, "n_embd": SECRET}, "config.n_embd", jobspec.SIZE_REASON),
        ({**GPT2_SMALL, "n_head": 7}, "config.n_head", jobspec.SIZE_REASON),  # not "7 heads … width 64"
    ],
)
def test_a_config_map_value_never_reaches_the_status(config: dict, named: str, reason: str) -> None:
    """A ConfigMap is read with the operator's rights: a refusal names the key, never what it holds."""
    files = {("team-a", "app-settings", "config.json"): json.dumps(config).encode()}
    with pytest.raises(dljob.InvalidJob) as caught:
        _resolver(files).workload(_hf_job(configMap="app-settings", sequenceLength=8))
    assert caught.value.field_path == "spec.model.huggingface.configMap"
    assert str(caught.value) == (
        f"spec.model.huggingface.configMap='team-a/app-settings[config.json]': its {named} {reason}"
    )


def test_a_spec_field_at_odds_with_a_config_map_quotes_the_spec_only() -> None:
    files = {("team-a", "configs", "config.json"): json.dumps(GPT2_SMALL).encode()}
    with pytest.raises(dljob.InvalidJob) as beyond:  # 129 tokens exceed GPT2_SMALL's 128 positions
        _resolver(files).workload(_hf_job(configMap="configs", sequenceLength=129))
    assert (beyond.value.field_path, beyond.value.value) == ("spec.model.huggingface.sequenceLength", 129)
    assert "128" not in str(beyond.value)
    with pytest.raises(dljob.InvalidJob) as optimizer:  # a reason of the spec alone keeps its words
        _resolver(files).workload(_hf_job(configMap="configs", sequenceLength=8, optimizer="lion"))
    assert "expected one of" in str(optimizer.value)


def test_unreadable_data_is_named_not_quoted() -> None:
    files = {
        ("team-a", "configs", "config.json"): SECRET.encode() + b"\xff",
        ("team-a", "graphs", "model.onnx"): SECRET.encode(),
    }
    not_json = _resolver(files).workload
    with pytest.raises(dljob.InvalidJob) as caught:
        not_json(_hf_job(configMap="configs", sequenceLength=8))
    assert str(caught.value).endswith(": not a JSON config")

    def quoting_parser(data: bytes, batch_size: int) -> dict[str, float]:
        raise ValueError(f"bad node {data!r}")

    resolver = jobspec.WorkloadResolver(
        canonical_model=_canonical, read_onnx=lambda *key: files[key], onnx_features=quoting_parser
    )
    with pytest.raises(dljob.InvalidJob) as graph:
        resolver.workload(dljob.parse(DLJobBuilder.stored("net").model(onnx={"configMap": "graphs"}).obj()))
    assert "unreadable ONNX graph (ValueError)" in str(graph.value) and "hunter2" not in str(graph.value)
