"""The pod route's annotations parsed into the DLJob's `JobSpec`: the same checks, errors naming the
annotation (`api/pod_spec.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from horus_operator.api import dljob, keys, pod_spec
from horus_operator.api.dljob import InvalidJob

REPO = Path(__file__).resolve().parents[3]
GOOD = {keys.ANNOTATION_MODEL: "resnet50", keys.ANNOTATION_BATCH_SIZE: "64"}


def _pod(annotations: dict[str, str], **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "team", "annotations": annotations, "labels": labels}}


def test_the_annotations_say_what_a_dljob_spec_says() -> None:
    job = pod_spec.parse(
        _pod(
            {
                **GOOD,
                keys.ANNOTATION_PRECISION: "bf16",
                keys.ANNOTATION_FRAMEWORK: "tensorflow",
                keys.ANNOTATION_MAX_SLOWDOWN: "1.5",
                keys.ANNOTATION_GPU_COUNT: "2",
                keys.ANNOTATION_PRIORITY: "-3",
                keys.ANNOTATION_TOTAL_STEPS: "1000",
                keys.ANNOTATION_INPUT_SHAPE: "3x32x32",
            }
        )
    )
    assert (job.namespace, job.name, job.architecture, job.batch_size) == ("team", "p", "resnet50", 64)
    assert (job.precision, job.max_slowdown, job.gpus, job.priority, job.total_steps) == (
        "bf16",
        1.5,
        2,
        -3,
        1000,
    )
    assert job.input_shape == [3, 32, 32]
    assert job.framework == "tensorflow"
    assert pod_spec.parse(_pod(GOOD)).framework == "pytorch"


def test_a_bad_framework_is_named_as_its_annotation() -> None:
    # the resolver checks it, as a DLJob's spec.framework
    bad = InvalidJob("spec.framework", "jax", "expected one of pytorch, tensorflow")
    renamed = pod_spec.renamed(bad, {**GOOD, keys.ANNOTATION_FRAMEWORK: "jax"})
    assert renamed.field_path == "metadata.annotations['horus.dev/framework']" and renamed.value == "jax"


def test_a_config_map_model_is_read_later_like_a_dljobs() -> None:
    onnx = pod_spec.parse(_pod({**GOOD, keys.ANNOTATION_MODEL: "onnx:graphs/net.onnx"}))
    assert onnx.onnx is not None and (onnx.onnx.config_map, onnx.onnx.key) == ("graphs", "net.onnx")
    hf = pod_spec.parse(
        _pod(
            {
                **GOOD,
                keys.ANNOTATION_MODEL: "huggingface:llama",
                keys.ANNOTATION_SEQUENCE_LENGTH: "2048",
                keys.ANNOTATION_LORA_RANK: "16",
                keys.ANNOTATION_LORA_TARGETS: "q_proj, v_proj",
                keys.ANNOTATION_GRADIENT_CHECKPOINTING: "true",
            }
        )
    )
    assert hf.huggingface == {
        "configMap": "llama",
        "key": "config.json",
        "sequenceLength": 2048,
        "lora": {"rank": 16, "targetModules": ["q_proj", "v_proj"]},
        "gradientCheckpointing": True,
    }
    assert hf.resolved_off_loop and onnx.resolved_off_loop


HF = {**GOOD, keys.ANNOTATION_MODEL: "huggingface:llama", keys.ANNOTATION_SEQUENCE_LENGTH: "2048"}
RECIPE = {
    keys.ANNOTATION_WEIGHTS_DTYPE: "nf4",
    keys.ANNOTATION_ATTENTION: "eager",
    keys.ANNOTATION_OPTIMIZER: "paged_adamw8bit",
    keys.ANNOTATION_OPTIMIZER_IN_BACKWARD: "true",
    keys.ANNOTATION_LOSS_CHUNKS: " 8 ",
    keys.ANNOTATION_ACTIVATION_OFFLOADING: "false",
    keys.ANNOTATION_SHARDING: "fsdp",
    keys.ANNOTATION_GRADIENT_ACCUMULATION_STEPS: "4",
    keys.ANNOTATION_SYNC_EACH_BATCH: "true",
}


def test_the_recipe_annotations_set_the_same_fields_as_a_dljobs_spec() -> None:
    routed = pod_spec.parse(_pod({**HF, **RECIPE}))
    written = dljob.parse(
        {
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {
                "batchSize": 64,
                "model": {
                    "huggingface": {
                        "configMap": "llama",
                        "key": "config.json",
                        "sequenceLength": 2048,
                        "weightsDtype": "nf4",
                        "attention": "eager",
                        "optimizer": "paged_adamw8bit",
                        "optimizerInBackward": True,
                        "lossChunks": 8,
                        "activationOffloading": False,
                        "sharding": "fsdp",
                        "gradientAccumulationSteps": 4,
                        "syncEachBatch": True,
                    }
                },
            },
        }
    )

    assert routed.huggingface == written.huggingface
    assert routed.huggingface is not None
    storage = dljob.huggingface_storage(routed.huggingface)
    assert (storage.weights_dtype, storage.attention) == ("nf4", "eager")
    assert dljob.huggingface_recipe(routed.huggingface) == dljob.HuggingfaceRecipe(
        optimizer_in_backward=True,
        loss_chunks=8,
        activation_offloading=False,
        sharding="fsdp",
        gradient_accumulation_steps=4,
        sync_each_batch=True,
    )


@pytest.mark.parametrize(
    ("key", "text", "reason"),
    [
        (keys.ANNOTATION_LOSS_CHUNKS, "eight", "an integer"),
        (keys.ANNOTATION_OPTIMIZER_IN_BACKWARD, "yes", "true or false"),
        (keys.ANNOTATION_ACTIVATION_OFFLOADING, "1", "true or false"),
        (keys.ANNOTATION_SYNC_EACH_BATCH, "yes", "true or false"),
        (keys.ANNOTATION_GRADIENT_ACCUMULATION_STEPS, "four", "an integer"),
    ],
)
def test_a_recipe_annotation_that_is_not_its_kind_is_named(key: str, text: str, reason: str) -> None:
    with pytest.raises(InvalidJob) as raised:
        pod_spec.parse(_pod({**HF, key: text}))
    assert raised.value.field_path == f"metadata.annotations['{key}']"
    assert raised.value.value == text and reason in raised.value.reason


@pytest.mark.parametrize(
    ("key", "text", "reason"),
    [
        (keys.ANNOTATION_WEIGHTS_DTYPE, "int4", "one of bf16, fp16, fp32, nf4"),
        (keys.ANNOTATION_ATTENTION, "flash", "one of sdpa, eager"),
        (keys.ANNOTATION_SHARDING, "ddp", "one of none, fsdp, zero2"),
        (keys.ANNOTATION_LOSS_CHUNKS, "0", "an integer from 1 to"),
    ],
)
def test_a_recipe_the_crd_would_refuse_is_refused_in_the_words_of_the_pod(
    key: str, text: str, reason: str
) -> None:
    """What the resolver refuses (`dljob.huggingface_storage`, `huggingface_recipe`), as the pod route
    reports it (`pod_spec.renamed`): the annotation at fault and its text."""
    annotations = {**HF, key: text}
    spec = pod_spec.parse(_pod(annotations)).huggingface
    assert spec is not None
    with pytest.raises(InvalidJob) as raised:
        dljob.huggingface_storage(spec)
        dljob.huggingface_recipe(spec)
    renamed = pod_spec.renamed(raised.value, annotations)
    assert renamed.field_path == f"metadata.annotations['{key}']"
    assert renamed.value == text and reason in renamed.reason


def test_the_recipe_annotations_are_the_owners_to_write() -> None:
    assert set(RECIPE) <= pod_spec.OWNER_ANNOTATIONS
    assert pod_spec.placement_records(RECIPE) == []


@pytest.mark.parametrize(
    ("changed", "named", "reason"),
    [
        ({keys.ANNOTATION_BATCH_SIZE: "0"}, keys.ANNOTATION_BATCH_SIZE, "from 1 to 65536"),
        ({keys.ANNOTATION_BATCH_SIZE: "many"}, keys.ANNOTATION_BATCH_SIZE, "an integer"),
        ({keys.ANNOTATION_MAX_SLOWDOWN: "0.9"}, keys.ANNOTATION_MAX_SLOWDOWN, "from 1 to 100"),
        ({keys.ANNOTATION_MAX_SLOWDOWN: "nan"}, keys.ANNOTATION_MAX_SLOWDOWN, "from 1 to 100"),
        ({keys.ANNOTATION_GPU_COUNT: "9"}, keys.ANNOTATION_GPU_COUNT, "from 1 to 8"),
        ({keys.ANNOTATION_TOTAL_STEPS: "0"}, keys.ANNOTATION_TOTAL_STEPS, "at least 1"),
        ({keys.ANNOTATION_MODEL: ""}, keys.ANNOTATION_MODEL, "required"),
        ({keys.ANNOTATION_MODEL: "onnx:"}, keys.ANNOTATION_MODEL, "name a ConfigMap"),
        (
            {keys.ANNOTATION_MODEL: "huggingface:llama", keys.ANNOTATION_GRADIENT_CHECKPOINTING: "yes"},
            keys.ANNOTATION_GRADIENT_CHECKPOINTING,
            "true or false",
        ),
    ],
)
def test_a_bad_annotation_is_named(changed: dict[str, str], named: str, reason: str) -> None:
    with pytest.raises(InvalidJob) as raised:
        pod_spec.parse(_pod({**GOOD, **changed}))
    assert raised.value.field_path == f"metadata.annotations['{named}']"
    assert reason in raised.value.reason


def test_the_batch_size_is_required() -> None:
    with pytest.raises(InvalidJob, match=r"metadata.annotations\['horus.dev/batch-size'\]=None: required"):
        pod_spec.parse(_pod({keys.ANNOTATION_MODEL: "resnet50"}))


def test_a_resolver_error_naming_a_spec_field_names_the_annotation_and_keeps_the_detail() -> None:
    annotations = {**GOOD, keys.ANNOTATION_MODEL: "huggingface:t5"}
    nested = InvalidJob("spec.model.huggingface.config.model_type", "t5", "not a supported architecture")
    renamed = pod_spec.renamed(nested, annotations)
    assert renamed.field_path == "metadata.annotations['horus.dev/model']"
    assert renamed.value == "huggingface:t5"
    assert "spec.model.huggingface.config.model_type='t5': not a supported architecture" in renamed.reason
    shape = pod_spec.renamed(
        InvalidJob("spec.model.inputShape", [3], "too small"), {keys.ANNOTATION_INPUT_SHAPE: "3"}
    )
    assert shape.field_path == "metadata.annotations['horus.dev/input-shape']" and shape.reason == "too small"
    other = InvalidJob("spec.template.spec.nodeName", "n", "no")
    assert pod_spec.renamed(other, annotations) is other


def test_the_bounds_are_the_crds() -> None:
    crd = yaml.safe_load((REPO / "crds" / "dljob.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for path, (low, high) in pod_spec.BOUNDS.items():
        field = spec[path.removeprefix("spec.")]
        assert field["minimum"] == low, path
        assert field.get("maximum", float("inf")) == high, path


@pytest.mark.parametrize(
    ("labels", "annotations", "wanted"),
    [
        ({keys.LABEL_MANAGED: "true"}, {}, True),
        ({keys.LABEL_MANAGED: "false"}, GOOD, False),  # opted out of its namespace's choice
        ({}, GOOD, True),  # only a labelled namespace's webhook sends an unlabelled pod
        ({}, {"other": "x"}, False),
    ],
)
def test_who_asks_for_horus(labels: dict[str, str], annotations: dict[str, str], wanted: bool) -> None:
    assert pod_spec.wants_horus(labels, annotations) is wanted


def test_only_horus_writes_its_placement_record() -> None:
    annotations = {**GOOD, keys.ANNOTATION_NODE: "n", keys.ANNOTATION_VISIBLE_DEVICES: "0", "x/y": "z"}
    assert pod_spec.placement_records(annotations) == [keys.ANNOTATION_NODE, keys.ANNOTATION_VISIBLE_DEVICES]


def test_queue_keys_never_meet_a_dljobs() -> None:
    key = pod_spec.request_key("team", "p")
    assert pod_spec.is_request_key(key) and not pod_spec.is_request_key("team/p")


def test_a_group_is_named_by_hand_or_by_its_workloads_label_and_the_annotation_wins() -> None:
    sized = {**GOOD, keys.ANNOTATION_GROUP_SIZE: "4"}
    assert pod_spec.group(_pod({**sized, keys.ANNOTATION_GROUP: "ring"})) == pod_spec.Group(
        "group team/ring", 4
    )
    by_label = _pod(sized, **{keys.LABEL_PYTORCHJOB: "mnist"})
    assert pod_spec.group(by_label) == pod_spec.Group("PyTorchJob team/mnist", 4)
    assert pod_spec.group(_pod(sized, **{keys.LABEL_JOBSET: "js"})) == pod_spec.Group("JobSet team/js", 4)
    both = _pod({**sized, keys.ANNOTATION_GROUP: "ring"}, **{keys.LABEL_PYTORCHJOB: "mnist"})
    assert pod_spec.group(both) == pod_spec.Group("group team/ring", 4)
    assert pod_spec.group(_pod(GOOD)) is None
    assert pod_spec.group(_pod({**GOOD, keys.ANNOTATION_GROUP_SIZE: "1", keys.ANNOTATION_GROUP: "a"})) == (
        pod_spec.Group("group team/a", 1)
    )


@pytest.mark.parametrize(
    ("annotations", "labels", "named", "reason"),
    [
        ({keys.ANNOTATION_GROUP: "ring"}, {}, keys.ANNOTATION_GROUP_SIZE, "required for the pods of a group"),
        (
            {},
            {keys.LABEL_PYTORCHJOB: "m"},
            keys.ANNOTATION_GROUP_SIZE,
            "required for the pods of a PyTorchJob",
        ),
        ({keys.ANNOTATION_GROUP_SIZE: "4"}, {}, keys.ANNOTATION_GROUP_SIZE, "without horus.dev/group"),
        (
            {keys.ANNOTATION_GROUP: "r", keys.ANNOTATION_GROUP_SIZE: "four"},
            {},
            keys.ANNOTATION_GROUP_SIZE,
            "an integer",
        ),
        (
            {keys.ANNOTATION_GROUP: "r", keys.ANNOTATION_GROUP_SIZE: "0"},
            {},
            keys.ANNOTATION_GROUP_SIZE,
            "from 1",
        ),
        ({keys.ANNOTATION_GROUP: " ", keys.ANNOTATION_GROUP_SIZE: "2"}, {}, keys.ANNOTATION_GROUP, "a name"),
    ],
)
def test_a_bad_group_is_named(
    annotations: dict[str, str], labels: dict[str, str], named: str, reason: str
) -> None:
    with pytest.raises(InvalidJob) as raised:
        pod_spec.group(_pod({**GOOD, **annotations}, **labels))
    assert raised.value.field_path == f"metadata.annotations['{named}']"
    assert reason in raised.value.reason


def test_the_group_annotations_are_the_owners_to_write() -> None:
    annotations = {**GOOD, keys.ANNOTATION_GROUP: "ring", keys.ANNOTATION_GROUP_SIZE: "2"}
    assert pod_spec.placement_records(annotations) == []


def test_the_lora_dropout_annotation_sets_the_adapters_dropout() -> None:
    lora = {keys.ANNOTATION_LORA_RANK: "8", keys.ANNOTATION_LORA_DROPOUT: "0.05"}
    routed = pod_spec.parse(_pod({**HF, **lora}))
    assert routed.huggingface is not None
    assert routed.huggingface["lora"] == {"rank": 8, "targetModules": [], "dropout": 0.05}
    with pytest.raises(InvalidJob) as raised:
        pod_spec.parse(_pod({**HF, keys.ANNOTATION_LORA_RANK: "8", keys.ANNOTATION_LORA_DROPOUT: "some"}))
    assert raised.value.field_path == f"metadata.annotations['{keys.ANNOTATION_LORA_DROPOUT}']"
