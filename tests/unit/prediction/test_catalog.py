"""The built-in catalog: every model name the shipped data uses resolves, features scale, errors name."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from horus_operator.prediction import catalog, features
from horus_operator.prediction.api import UnknownModelError

REPO = Path(__file__).resolve().parents[3]

# The model names of the measured data (data/README.md): Gavel's co-location and trace job types,
# Muri's traces; and the Horus papers' model types.
GAVEL_MODELS = ["resnet18", "resnet50", "transformer", "lstm-lm", "recommendation", "a3c", "cyclegan"]
GAVEL_JOB_TYPES = ["ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "A3C", "CycleGAN"]
MURI_MODELS = ["gpt2", "shufflenet_v2_x1_0", "resnet18", "bert", "vgg16", "vgg19", "a2c", "dqn"]
HORUS_TYPES = [
    "ResNet-50",
    "VGG-16",
    "DenseNet-121",
    "MobileNetV2",
    "ShuffleNetV2",
    "MNASNet",
    "EfficientNet",
    "SqueezeNet",
    "GoogLeNet",
    "ResNeXt-50",
    "DPN",
    "PyramidNet",
    "LSTM",
    "Transformer",
    "transformer-lm",
]


# The alnair utilization data set's spellings (Model column), stray spaces included.
ALNAIR_MODELS = [
    "MobileNet",
    "Nasnet_Mobile",
    "EfficientNet_v2",
    "ResNet50",
    "Inception_v3",
    "DCGAN",
    "Image Segmentation",
    "Reinforcement Learning ",
    "small_bert/ bert_en_uncased_L-2_H-128_A-2 ",
    "small_bert/bert_en_uncased_L-4_H-512_A-8",
]
MODEL_COLUMNS = ("model", "model_a", "model_b", "model_name", "Model")
# Tables whose model columns name DL models (the Alibaba node list's `model` is a GPU model).
JOB_TABLES = ("colocation/*.csv", "utilization/*.csv", "traces/muri*.csv")


@pytest.mark.parametrize("name", GAVEL_MODELS + MURI_MODELS)
def test_data_model_names_are_canonical(name: str):
    assert catalog.canonical(name) == name
    assert catalog.lookup(name, 16)["batch_size"] == 16


@pytest.mark.parametrize(("job_type", "name"), list(zip(GAVEL_JOB_TYPES, GAVEL_MODELS, strict=True)))
def test_gavel_job_types_map_to_the_data_names(job_type: str, name: str):
    assert catalog.canonical(job_type) == name


@pytest.mark.parametrize("name", ALNAIR_MODELS)
def test_alnair_model_spellings_resolve(name: str):
    assert catalog.lookup(name, 256)["params"] > 0


@pytest.mark.parametrize("name", HORUS_TYPES)
def test_horus_model_types_are_in_the_catalog(name: str):
    assert catalog.lookup(name, 32)["flops_per_sample"] > 0


def _names_in_shipped_data() -> set[str]:
    """Model names in the repository's data files, where present."""
    found: set[str] = set()
    tables = [path for pattern in JOB_TABLES for path in sorted((REPO / "data").glob(pattern))]
    for path in tables:
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                found.update(
                    row[column] for column in ("model", "model_a", "model_b", "model_name") if column in row
                )
    for path in sorted((REPO / "data").rglob("gavel*.trace")):
        for line in path.read_text().splitlines():
            found.add(re.sub(r"\s*\(batch size \d+\)$", "", line.split("\t")[0]))
    return found


def test_every_model_name_in_the_shipped_data_resolves():
    names = _names_in_shipped_data()
    if not names:
        pytest.skip("no data files with model names in data/")
    unknown = {name.strip() for name in names if catalog.alias_key(name) and _unresolved(name)}
    assert not unknown


def _unresolved(name: str) -> bool:
    try:
        catalog.canonical(name)
    except UnknownModelError:
        return True
    return False


@pytest.mark.parametrize("spelling", ["RESNET50", "resnet-50", " ResNet_50 ", "resnet.50"])
def test_names_match_ignoring_case_and_punctuation(spelling: str):
    assert catalog.canonical(spelling) == "resnet50"


def test_lookup_scales_per_sample_quantities_only():
    small, large = catalog.lookup("resnet50", 16), catalog.lookup("resnet50", 64)
    assert large["flops_per_batch"] == 4 * small["flops_per_batch"] == 64 * small["flops_per_sample"]
    assert large["activation_bytes_per_batch"] == 4 * small["activation_bytes_per_batch"]
    assert large["params"] == small["params"]


def test_lookup_returns_a_fresh_dict():
    first = catalog.lookup("vgg16", 8)
    first["flops_per_batch"] = -1.0
    assert catalog.lookup("vgg16", 8)["flops_per_batch"] > 0


def test_unknown_model_names_the_model_and_lists_known_ones():
    with pytest.raises(UnknownModelError) as raised:
        catalog.lookup("alexnet-9000", 32)
    message = str(raised.value)
    assert "alexnet-9000" in message
    assert all(name in message for name in ("resnet50", "lstm-lm", "gpt2"))
    assert isinstance(raised.value, ValueError)


def test_every_entry_states_its_source_assumptions_and_a_complete_profile():
    for name in catalog.names():
        entry = catalog.entry(name)
        assert entry["source"] and entry["sample"] and entry["dataset"]
        assert isinstance(entry["assumptions"], list)
        assert set(entry["profile"]) == set(features.PROFILE_NAMES)


def test_architectures_are_ordered_as_their_graphs_say():
    """Relations that hold for the reference architectures, independent of the exact counts."""
    flops = {name: catalog.lookup(name, 1)["flops_per_sample"] for name in catalog.names()}
    params = {name: catalog.lookup(name, 1)["params"] for name in catalog.names()}
    assert flops["resnet18"] < flops["resnet18-imagenet"] < flops["resnet50"] < flops["resnet101"]
    assert params["resnet18"] < params["resnet18-imagenet"]  # 10 versus 1000 classes, same body
    assert params["vgg16"] < params["vgg19"] and flops["vgg16"] < flops["vgg19"]
    assert catalog.lookup("lstm-lm", 1)["recurrent_steps"] == 2 * 35  # 2 layers × bptt 35
    assert catalog.lookup("gpt2", 1)["attention_ops"] == 2 * 12  # q·kᵀ and p·v in each of 12 blocks


def test_shipped_catalog_matches_its_generator():
    """data/catalog.json is what hack/gen_catalog.py computes from the reference graphs today."""
    result = subprocess.run(
        [sys.executable, str(REPO / "hack" / "gen_catalog.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# Every entry is exported from its reference PyTorch module (hack/catalog/torch_models.py; issue 9 item 5,
# issue 27 item 6 for the entries that were typed layer for layer before).
@pytest.mark.parametrize("name", catalog.names())
def test_every_entry_resolves_with_positive_features(name: str):
    features_at_32 = catalog.lookup(name, 32)
    assert features_at_32["flops_per_sample"] > 0 and features_at_32["params"] > 0
    assert features_at_32["flops_per_batch"] == 32 * features_at_32["flops_per_sample"]
    entry = catalog.entry(name)
    assert entry["source"] and entry["assumptions"]


def test_exported_architectures_have_the_published_sizes():
    """Published counts (torchvision's weight tables; the configs' known sizes) and FLOPs (2 × the
    published multiply-adds), so a broken export shows as a wrong number, not only as a stale file."""
    params = {name: catalog.lookup(name, 1)["params"] for name in catalog.names()}
    gflops = {name: catalog.lookup(name, 1)["flops_per_sample"] / 1e9 for name in catalog.names()}
    assert params["vit_b_16"] == 86_567_656 and gflops["vit_b_16"] == pytest.approx(2 * 17.56, rel=0.02)
    assert params["mobilenet_v3_large"] == 5_483_032
    assert gflops["mobilenet_v3_large"] == pytest.approx(2 * 0.22, rel=0.05)
    assert gflops["alexnet"] == pytest.approx(2 * 0.71, rel=0.05)
    assert gflops["convnext_tiny"] == pytest.approx(2 * 4.46, rel=0.03)
    assert params["gpt2-medium"] == pytest.approx(355e6, rel=0.01)
    assert params["bert-large"] == pytest.approx(335e6, rel=0.01)
    assert params["tinyllama-1.1b"] == pytest.approx(1.1e9, rel=0.01)
    assert params["dlrm"] > 500e6  # the Criteo Kaggle embedding tables
    # the exported torchvision ResNet-50 and the built entry count alike
    assert catalog.lookup("wide_resnet50_2", 1)["conv_ops"] == catalog.lookup("resnet50", 1)["conv_ops"]
