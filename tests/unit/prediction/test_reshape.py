"""Catalog architectures at another input shape (`prediction.reshape`, `catalog.reshaped_profile`): the
shipped graph re-shaped and counted again, or refused with the reason."""

from __future__ import annotations

import pytest

from horus_operator.prediction import catalog, reshape
from horus_operator.prediction.api import UnknownModelError, Workload


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "mobilenet_v2", "convnext_tiny", "densenet121"])
def test_at_its_own_shape_the_shipped_graph_counts_as_the_catalog_entry(name: str) -> None:
    own = next(iter(catalog.sample_shapes(name).values()))
    assert catalog.reshaped_profile(name, own) is None  # the entry stands
    counted = reshape.profile_at(catalog._graph(name), own)
    if name != "vgg16":  # VGG's shipped graph adds the adaptive pool, the identity at 224×224
        assert counted == pytest.approx(dict(catalog.entry(name)["profile"]))


@pytest.mark.parametrize("name", ["resnet50", "vgg16"])
def test_at_32x32_every_feature_map_side_shrinks_7x_and_the_head_stays(name: str) -> None:
    # 224 / 32 = 7, and every stride-2 stage of these nets halves both exactly (224→…→7, 32→…→1), so
    # each convolution does 1/49 of its work; the classifier sees the same width (global or 7×7
    # adaptive pooling) and does all of it.
    small = catalog.reshaped_profile(name, [3, 32, 32])
    full = catalog.entry(name)["profile"]
    assert small is not None
    assert small["conv_flops_per_sample"] == pytest.approx(full["conv_flops_per_sample"] / 49, rel=1e-12)
    assert small["linear_flops_per_sample"] == full["linear_flops_per_sample"]
    assert small["params"] == full["params"]
    assert small["input_bytes_per_sample"] == full["input_bytes_per_sample"] / 49


@pytest.mark.parametrize(
    ("name", "shape", "reason"),
    [
        ("vgg16", [3, 16, 16], "the input is too small"),  # five 2×2 max pools need 32 pixels
        ("inception_v3", [3, 32, 32], "the input is too small"),  # torchvision: at least 75×75
        ("resnet50", [1, 32, 32], "takes 3 input channels"),
        ("vit_b_16", [3, 32, 32], "the graph was made at one input size"),  # 196 patches baked in
        ("resnet50", [32, 32], "has the rank of no input"),
        ("resnet50", [3, 0, 32], "at least 1"),
    ],
)
def test_a_shape_the_graph_cannot_take_is_refused_with_the_reason(
    name: str, shape: list[int], reason: str
) -> None:
    with pytest.raises(reshape.ShapeError, match=reason):
        catalog.reshaped_profile(name, shape)


def test_a_sequence_length_reshapes_a_recurrent_model_and_the_counts_double() -> None:
    longer = catalog.reshaped_profile("lstm-lm", [70])  # 35 → 70 time steps
    full = catalog.entry("lstm-lm")["profile"]
    assert longer is not None
    assert longer["recurrent_steps"] == 2 * full["recurrent_steps"]
    assert longer["flops_per_sample"] == pytest.approx(2 * full["flops_per_sample"])


def test_an_unknown_model_is_named() -> None:
    with pytest.raises(UnknownModelError):
        catalog.reshaped_profile("nosuchnet", [3, 32, 32])


def test_a_workload_at_a_shape_is_named_and_keyed_by_it_and_at_its_own_shape_is_the_catalog_model() -> None:
    cifar = catalog.workload_at_shape("VGG-16", [3, 32, 32], 128, "amp")
    assert (cifar.model, cifar.features_key, cifar.precision) == (
        "vgg16@3x32x32",
        "shape:vgg16:3x32x32",
        "amp",
    )
    assert catalog.workload_at_shape("VGG-16", [3, 224, 224], 128) == Workload("vgg16", 128)
