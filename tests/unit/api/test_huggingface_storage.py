"""spec.model.huggingface's weightsDtype, attention and memory-saving settings (issue 45): defaulted as
the CRD does, a value the CRD's schema would refuse named, and the CRD's enums the API package's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from horus_operator.api import defaults
from horus_operator.api.dljob import (
    HuggingfaceRecipe,
    HuggingfaceStorage,
    InvalidJob,
    huggingface_recipe,
    huggingface_storage,
)

CRDS = Path(__file__).resolve().parents[3]  # the repository: crds/ and the chart's crds/


def test_a_spec_without_the_fields_gets_the_defaults() -> None:
    assert huggingface_storage({"sequenceLength": 2048}) == HuggingfaceStorage(None, defaults.ATTENTION)


@pytest.mark.parametrize("weights", defaults.WEIGHTS_DTYPES)
@pytest.mark.parametrize("attention", defaults.ATTENTIONS)
def test_every_value_the_crd_takes_is_read(weights: str, attention: str) -> None:
    storage = huggingface_storage({"weightsDtype": weights, "attention": attention})
    assert storage == HuggingfaceStorage(weights, attention)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"weightsDtype": "int8"}, "spec.model.huggingface.weightsDtype"),
        ({"weightsDtype": True}, "spec.model.huggingface.weightsDtype"),
        ({"attention": "flash"}, "spec.model.huggingface.attention"),
    ],
)
def test_a_value_outside_the_enum_is_named(spec: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidJob) as raised:
        huggingface_storage(spec)
    assert raised.value.field_path == field


def test_a_spec_without_the_memory_savings_gets_the_defaults() -> None:
    assert huggingface_recipe({"sequenceLength": 2048}) == HuggingfaceRecipe(
        optimizer_in_backward=False,
        loss_chunks=defaults.LOSS_CHUNKS,
        activation_offloading=False,
        sharding=defaults.SHARDING,
    )


@pytest.mark.parametrize("sharding", defaults.SHARDINGS)
def test_every_memory_saving_the_crd_takes_is_read(sharding: str) -> None:
    spec = {
        "optimizerInBackward": True,
        "lossChunks": 8,
        "activationOffloading": True,
        "sharding": sharding,
        "gradientAccumulationSteps": 4,
        "syncEachBatch": True,
    }
    assert huggingface_recipe(spec) == HuggingfaceRecipe(True, 8, True, sharding, 4, True)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"optimizerInBackward": "yes"}, "spec.model.huggingface.optimizerInBackward"),
        ({"activationOffloading": 1}, "spec.model.huggingface.activationOffloading"),
        ({"lossChunks": 0}, "spec.model.huggingface.lossChunks"),
        ({"lossChunks": True}, "spec.model.huggingface.lossChunks"),
        ({"lossChunks": "8"}, "spec.model.huggingface.lossChunks"),
        ({"sharding": "deepspeed"}, "spec.model.huggingface.sharding"),
        ({"gradientAccumulationSteps": 0}, "spec.model.huggingface.gradientAccumulationSteps"),
        ({"gradientAccumulationSteps": 2.5}, "spec.model.huggingface.gradientAccumulationSteps"),
        ({"syncEachBatch": "true"}, "spec.model.huggingface.syncEachBatch"),
    ],
)
def test_a_memory_saving_the_crd_would_refuse_is_named(spec: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidJob) as raised:
        huggingface_recipe(spec)
    assert raised.value.field_path == field


# spec.model.huggingface's enums as the API package has them, which the CRD and its chart copy must list
ENUMS = {
    "optimizer": defaults.OPTIMIZERS,
    "weightsDtype": defaults.WEIGHTS_DTYPES,
    "attention": defaults.ATTENTIONS,
    "sharding": defaults.SHARDINGS,
}


@pytest.mark.parametrize("crd", [CRDS / "crds", CRDS / "charts" / "horus" / "crds"])
def test_the_crds_enums_are_the_api_packages(crd: Path) -> None:
    schema = yaml.safe_load((crd / "dljob.yaml").read_text())["spec"]["versions"][0]["schema"]
    spec = schema["openAPIV3Schema"]["properties"]["spec"]
    fields: dict[str, Any] = spec["properties"]["model"]["properties"]["huggingface"]["properties"]
    assert {name: tuple(fields[name]["enum"]) for name in ENUMS} == ENUMS
