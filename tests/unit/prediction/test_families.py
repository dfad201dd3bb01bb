"""Architecture families: derived from the catalog names, the same groups the shipped models were
cross-validated on."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from horus_operator.prediction import artifacts, catalog
from horus_operator.prediction.training import memory_fit, roofline_fit
from horus_operator.prediction.training.families import family

DATA = Path(__file__).resolve().parents[3] / "data"


def step_time_models() -> list[str]:
    """The models of the step times the shipped roofline constants are calibrated on (Gavel's, timm's)."""
    samples = roofline_fit.step_time_samples(
        DATA / "colocation" / "gavel_isolated.csv",
        catalog.lookup,
        timm=DATA / "throughput" / "timm_train_rtx3090_amp.csv",
    )
    return list(samples.models)


def peak_families() -> list[str]:
    """The families of the measured memory peaks the shipped memory model is fitted on (every source;
    a model counted at another shape, `resnet50@3x32x32`, is its base model's)."""
    return list(memory_fit.all_peaks(DATA / "memory", catalog.lookup)["family"])


def held_out_family_sizes(model: str) -> dict[str, int]:
    """Each family the shipped `model` was cross-validated without, and its number of samples."""
    metadata = json.loads((artifacts.SHIPPED_DIR / artifacts.METADATA_FILE).read_text())
    return {name: scores["samples"] for name, scores in metadata[model]["cv"]["leave_one_family_out"].items()}


def test_the_shipped_models_were_cross_validated_on_the_derived_families() -> None:
    assert Counter(family(model) for model in step_time_models()) == held_out_family_sizes("utilization")
    assert Counter(peak_families()) == held_out_family_sizes("memory")


def test_the_sizes_and_variants_of_an_architecture_share_its_family() -> None:
    assert family("regnet_x_400mf") == family("regnet_y_128gf") == "regnet"
    assert family("vgg11") == family("vgg19_bn") == "vgg"
    assert family("inception_v3-imagenet") == "inception"
    assert family("lstm-lm") == "lstm"


def test_stems_of_one_family_under_other_names_join_it() -> None:
    assert {family(name) for name in ("resnet18", "resnext101_64x4d", "wide_resnet50_2")} == {"resnet"}
    assert {family(name) for name in ("mobilenet_v2", "mnasnet0_75", "efficientnet_b0")} == {"mobile"}


def test_a_model_without_relatives_is_a_family_of_its_own() -> None:
    assert family("a3c") == "a3c"
    assert family("cyclegan") == "cyclegan"
    assert family("1024-mlp") == "1024-mlp"  # no letters before the separator: the whole name
