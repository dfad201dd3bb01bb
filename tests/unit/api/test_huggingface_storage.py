"""spec.model.huggingface's weightsDtype and attention (issue 45): defaulted as the CRD does, and a
value outside the CRD's enum named."""

from __future__ import annotations

import pytest

from horus_operator.api import defaults
from horus_operator.api.dljob import HuggingfaceStorage, InvalidJob, huggingface_storage


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
