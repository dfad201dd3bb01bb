"""Generate horus_operator/prediction/data/catalog.json from real computation graphs.

Every catalog model is built as a graph-only ONNX model (hack/catalog/: layer for layer as its
reference PyTorch code defines it, weights as shapes without data), shape-inferred by onnx, and
profiled by the same `features.profile_onnx` that `horus features MODEL.onnx` runs. Where a
parameter count is published (torchvision's model tables, Hugging Face's model cards) the generator
checks the graph against it and refuses to write a catalog that disagrees.

    python hack/gen_catalog.py               # rewrite the catalog and docs/catalog.md
    python hack/gen_catalog.py --check       # exit 1 if either committed file is stale
    python hack/gen_catalog.py --crosscheck  # compare FLOPs with onnx-tool (pip install -e '.[catalog]')
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from catalog import other, sequence, vision

from horus_operator.prediction import catalog as runtime_catalog
from horus_operator.prediction import features

REPO = Path(__file__).resolve().parent.parent
CATALOG_PATH = REPO / "horus_operator/prediction/data/catalog.json"
DOCS_PATH = REPO / "docs/catalog.md"

TORCHVISION = "torchvision.models (ImageNet, 3×224×224, 1000 classes)"
IMAGENET_SAMPLE = "one 3×224×224 image"
FORWARD_ONLY = "forward pass of the model as trained; backward ≈ 2× forward is not in the graph"


@dataclass(frozen=True)
class Entry:
    name: str
    build: Callable[[], onnx.ModelProto]
    task: str
    dataset: str
    sample: str  # what one unit of batch size is
    source: str  # the code the graph follows
    assumptions: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    published_params: int | None = None  # checked against the graph when known
    groups: tuple[str, ...] = field(default=())  # which workload sets use it: gavel, muri, horus, alnair
    # The published configuration the count applies to, when the entry differs from it (e.g. the
    # entry has a 43-class head, the published model 1000 classes): the same builder, other arguments.
    reference: Callable[[], onnx.ModelProto] | None = None


def _torchvision(
    name: str,
    build: Callable[[], onnx.ModelProto],
    params: int,
    *aliases: str,
    groups: tuple[str, ...] = ("horus",),
) -> Entry:
    return Entry(
        name,
        build,
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE,
        f"{TORCHVISION}: {name}",
        ("224×224 crops as torchvision's ImageNet recipe trains them",),
        aliases,
        params,
        groups,
    )


def _resnet(blocks: list[int], bottleneck: bool, **options: Any) -> Callable[[], onnx.ModelProto]:
    return lambda: vision.resnet(blocks, bottleneck=bottleneck, **options)


GAVEL = (
    Entry(
        "resnet18",
        _resnet([2, 2, 2, 2], False, input_shape=vision.CIFAR, classes=10),
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "Gavel workloads/pytorch/image_classification/cifar10 (kuangliu/pytorch-cifar ResNet18: 3×3 stem, "
        "no max-pool, 10 classes)",
        (
            "Gavel's ResNet-18 job trains on CIFAR-10; Muri's resnet18 jobs are ImageNet-sized: see "
            "resnet18-imagenet",
        ),
        ("ResNet-18", "resnet18-cifar10", "resnet18_cifar"),
        None,
        ("gavel", "muri"),
    ),
    Entry(
        "resnet50",
        _resnet([3, 4, 6, 3], True),
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE,
        "Gavel workloads/pytorch/image_classification/imagenet main.py -a resnet50 (torchvision resnet50)",
        ("224×224 crops (RandomResizedCrop(224) in the ImageNet example)",),
        ("ResNet-50", "resnet-50-imagenet"),
        25_557_032,
        ("gavel", "horus"),
    ),
    Entry(
        "transformer",
        lambda: sequence.translation_transformer(
            source_vocabulary=3000,
            target_vocabulary=3000,
            width=512,
            inner=2048,
            heads=8,
            layers=6,
            source_length=32,
            target_length=32,
            max_length=52,
        ),
        "translation",
        "Multi30k (en-de, tokenized, lower-cased)",
        "one source/target sentence pair",
        "Gavel workloads/pytorch/translation (attention-is-all-you-need-pytorch: 6+6 layers, d_model 512, "
        "d_inner 2048, 8 heads, d_k = d_v = 64, Conv1d feed-forward, -proj_share_weight)",
        (
            "vocabularies of 3,000 source and 3,000 target words: Multi30k after preprocess.py's rare-word "
            "trimming has a few thousand; the exact size depends on the preprocessing run",
            "sentences padded to 32 tokens (a batch is padded to its longest sentence; Multi30k sentences "
            "average about 13 tokens, max_len 50)",
            "position tables are frozen sinusoids (not parameters), as in the reference code",
        ),
        ("Transformer", "transformer-translation", "transformer-multi30k"),
        None,
        ("gavel", "horus"),
    ),
    Entry(
        "lstm-lm",
        lambda: sequence.word_lstm_lm(vocabulary=33278, embedding=200, hidden=200, layers=2, bptt=35),
        "language modelling",
        "Wikitext-2",
        "one 35-token column of a bptt chunk",
        "Gavel workloads/pytorch/language_modeling (pytorch/examples word_language_model RNNModel: "
        "LSTM, emsize 200, nhid 200, 2 layers, bptt 35, untied)",
        ("Wikitext-2 vocabulary of 33,278 words (the example's Corpus dictionary)",),
        ("LM", "LSTM", "lstm_lm", "word-lm", "lstm-wikitext2"),
        None,
        ("gavel", "horus"),
    ),
    Entry(
        "recommendation",
        lambda: other.recoder_autoencoder(items=20108, hidden=200),
        "recommendation (collaborative filtering)",
        "MovieLens-20M",
        "one user's item vector",
        "Gavel workloads/pytorch/recommendation (recoder DynamicAutoencoder hidden_layers=[200], tanh)",
        (
            "20,108 items: the ML-20M item count after the VAE-CF preprocessing Gavel's pro_sg data follows",
            "the dynamic autoencoder only touches items present in the batch (plus negative samples); the "
            "graph uses the full item vector, an upper bound",
        ),
        ("Recommendation", "autoencoder", "recoder"),
        None,
        ("gavel",),
    ),
    Entry(
        "a3c",
        lambda: other.a3c_lstm(frame=80, actions=6),
        "reinforcement learning",
        "Atari Pong",
        "one forward step on one frame",
        "Gavel workloads/pytorch/rl (rl_a3c_pytorch A3Clstm: 4 conv/max-pool stages, LSTMCell(1024, 512))",
        (
            "1×80×80 grey frames and 6 Pong actions (the repository's environment config)",
            "Gavel reports batch size 1: each worker process steps one environment",
        ),
        ("A3C",),
        None,
        ("gavel",),
    ),
    Entry(
        "cyclegan",
        lambda: other.cyclegan(image=256, residual_blocks=9),
        "image-to-image translation",
        "monet2photo",
        "one unaligned image pair (A, B) through a whole training step",
        "Gavel workloads/pytorch/cyclegan (PyTorch-GAN cyclegan.py: ResNet generators with 9 residual "
        "blocks, PatchGAN discriminators, instance norm)",
        (
            "256×256 crops (img_height/img_width defaults), batch size 1",
            "the graph holds one training step's forward work: 6 generator and 6 discriminator passes",
        ),
        ("CycleGAN",),
        None,
        ("gavel",),
    ),
)

MURI = (
    Entry(
        "gpt2",
        lambda: sequence.gpt2(
            vocabulary=50257, positions=1024, width=768, heads=12, layers=12, sequence=1024
        ),
        "language modelling",
        "a text corpus (Muri's train_dir; the code does not name it)",
        "one 1,024-token block",
        "Muri cluster_exp/workloads/models/nlp_model.py (Hugging Face GPT2LMHeadModel with the default "
        "GPT2Config: 12 layers, 768 wide, 12 heads)",
        (
            "block size 1,024 tokens (tokenizer.max_len_single_sentence for gpt2)",
            "LM head tied to the token embedding, as in GPT2LMHeadModel",
        ),
        ("GPT-2", "gpt-2"),
        124_439_808,
        ("muri",),
    ),
    Entry(
        "bert",
        lambda: sequence.bert_mlm(
            vocabulary=30522, positions=512, width=768, heads=12, layers=12, inner=3072, sequence=512
        ),
        "masked language modelling",
        "a text corpus (Muri's train_dir; the code does not name it)",
        "one 512-token block",
        "Muri cluster_exp/workloads/models/nlp_model.py (Hugging Face BertForMaskedLM with the default "
        "BertConfig: BERT-base, 12 layers, 768 wide)",
        (
            "block size 510 tokens + [CLS] and [SEP] = 512 (bert-base-uncased max_len_single_sentence)",
            "MLM head over every position (masking picks the loss positions, not the compute)",
        ),
        ("BERT", "bert-base"),
        109_514_298,
        ("muri",),
    ),
    _torchvision("vgg16", lambda: vision.vgg("vgg16"), 138_357_544, "VGG-16", groups=("muri", "horus")),
    _torchvision("vgg19", lambda: vision.vgg("vgg19"), 143_667_240, "VGG-19", groups=("muri", "horus")),
    _torchvision(
        "shufflenet_v2_x1_0",
        lambda: vision.shufflenet_v2([116, 232, 464, 1024], "shufflenet_v2_x1_0"),
        2_278_604,
        "ShuffleNetV2",
        "shufflenet-v2",
        groups=("muri", "horus"),
    ),
    Entry(
        "a2c",
        lambda: other.a2c(frames=4, actions=4),
        "reinforcement learning",
        "Atari Breakout",
        "one observation (batch size = number of parallel environments)",
        "Muri cluster_exp/workloads/models/a2c_model.py (DeepRL CategoricalActorCriticNet(NatureConvBody))",
        (
            "4 stacked 84×84 frames, 4 Breakout actions",
            "one forward pass per observation; the rollout's extra forward passes are not in the graph",
        ),
        ("A2C",),
        None,
        ("muri",),
    ),
    Entry(
        "dqn",
        lambda: other.dqn(frames=4, actions=4),
        "reinforcement learning",
        "Atari Breakout",
        "one replayed transition",
        "Muri cluster_exp/workloads/models/dqn_model.py (DeepRL VanillaNet(NatureConvBody), DQNAgent)",
        (
            "4 stacked 84×84 frames, 4 Breakout actions",
            "each transition runs the online network on the state and the target network on the next state; "
            "the target copy is frozen, so its weights are not counted as parameters",
        ),
        ("DQN",),
        None,
        ("muri",),
    ),
    _torchvision(
        "resnet18-imagenet",
        _resnet([2, 2, 2, 2], False),
        11_689_512,
        "resnet18_imagenet",
        groups=("muri", "horus"),
    ),
)

HORUS = (
    _torchvision("resnet34", _resnet([3, 4, 6, 3], False), 21_797_672, "ResNet-34"),
    _torchvision("resnet101", _resnet([3, 4, 23, 3], True), 44_549_160, "ResNet-101"),
    _torchvision("resnet152", _resnet([3, 8, 36, 3], True), 60_192_808, "ResNet-152"),
    _torchvision(
        "resnext50_32x4d",
        _resnet([3, 4, 6, 3], True, groups=32, width_per_group=4),
        25_028_904,
        "ResNeXt-50",
        "resnext50",
    ),
    _torchvision(
        "resnext101_32x8d",
        _resnet([3, 4, 23, 3], True, groups=32, width_per_group=8),
        88_791_336,
        "ResNeXt-101",
        "resnext101",
    ),
    _torchvision("vgg11", lambda: vision.vgg("vgg11"), 132_863_336, "VGG-11"),
    _torchvision("vgg13", lambda: vision.vgg("vgg13"), 133_047_848, "VGG-13"),
    _torchvision(
        "densenet121",
        lambda: vision.densenet(32, (6, 12, 24, 16), 64, "densenet121"),
        7_978_856,
        "DenseNet-121",
        "densenet",
    ),
    _torchvision(
        "densenet169",
        lambda: vision.densenet(32, (6, 12, 32, 32), 64, "densenet169"),
        14_149_480,
        "DenseNet-169",
    ),
    _torchvision(
        "densenet201",
        lambda: vision.densenet(32, (6, 12, 48, 32), 64, "densenet201"),
        20_013_928,
        "DenseNet-201",
    ),
    _torchvision("mobilenet_v2", vision.mobilenet_v2, 3_504_872, "MobileNetV2", "mobilenet-v2"),
    _torchvision(
        "shufflenet_v2_x0_5",
        lambda: vision.shufflenet_v2([48, 96, 192, 1024], "shufflenet_v2_x0_5"),
        1_366_792,
    ),
    _torchvision(
        "shufflenet_v2_x1_5",
        lambda: vision.shufflenet_v2([176, 352, 704, 1024], "shufflenet_v2_x1_5"),
        3_503_624,
    ),
    _torchvision(
        "shufflenet_v2_x2_0",
        lambda: vision.shufflenet_v2([244, 488, 976, 2048], "shufflenet_v2_x2_0"),
        7_393_996,
    ),
    _torchvision("mnasnet0_5", lambda: vision.mnasnet(0.5, "mnasnet0_5"), 2_218_512),
    _torchvision("mnasnet1_0", lambda: vision.mnasnet(1.0, "mnasnet1_0"), 4_383_312, "MNASNet", "mnasnet"),
    _torchvision(
        "efficientnet_b0",
        vision.efficientnet_b0,
        5_288_548,
        "EfficientNet",
        "efficientnet",
        "EfficientNet-B0",
    ),
    _torchvision("squeezenet1_0", lambda: vision.squeezenet("1_0"), 1_248_424, "SqueezeNet", "squeezenet"),
    _torchvision("squeezenet1_1", lambda: vision.squeezenet("1_1"), 1_235_496, "SqueezeNet-1.1"),
    Entry(
        "googlenet",
        vision.googlenet,
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE,
        f"{TORCHVISION}: googlenet",
        ("trained from scratch, so both auxiliary classifiers run (aux_logits)",),
        ("GoogLeNet", "inception-v1"),
        13_004_888,
        ("horus",),
    ),
    Entry(
        "dpn92",
        vision.dpn92_cifar,
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "kuangliu/pytorch-cifar DPN92 (DPN is not in torchvision)",
        ("CIFAR-10 input: the Horus papers do not state the DPN variant or dataset",),
        ("DPN", "DPN-92"),
        None,
        ("horus",),
    ),
    Entry(
        "pyramidnet110",
        vision.pyramidnet_cifar,
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "dyhan0920/PyramidNet-PyTorch PyramidNet(depth 110, alpha 48, basic blocks, CIFAR)",
        (
            "depth 110 and alpha 48, the repository's CIFAR example; "
            "the Horus papers do not state the variant",
        ),
        ("PyramidNet", "pyramidnet"),
        None,
        ("horus",),
    ),
    Entry(
        "transformer-lm",
        lambda: sequence.word_transformer_lm(
            vocabulary=33278, width=200, heads=2, feedforward=200, layers=2, bptt=35
        ),
        "language modelling",
        "Wikitext-2",
        "one 35-token sequence",
        "pytorch/examples word_language_model TransformerModel (emsize 200, nhid 200, 2 layers, 2 heads)",
        ("the word_language_model defaults with --model Transformer; Wikitext-2 vocabulary 33,278",),
        ("TransformerLM", "transformer_lm"),
        None,
        ("horus",),
    ),
)

GTSRB_SAMPLE = "one 224×224 GTSRB image"
ALNAIR_CLASSIFIER = (
    "CentaurusInfra/alnair open-data/gpu-sharing/Image_Classification.py "
    "(TF-Hub {hub} feature vector, 43-class dense head)"
)
FROZEN_BACKBONE = (
    "224×224 input (IMAGE_SHAPE in the script)",
    "the TF-Hub feature extractor is frozen (trainable=False): only the dense head trains, so the backward "
    "pass is cheaper than for a fully trained model; params counts every weight in the graph",
)
SMALL_BERTS = [(4, 512, 8), (2, 128, 2), (2, 256, 4), (2, 512, 8), (2, 768, 12), (4, 128, 2), (4, 256, 4)]


def _small_bert(layers: int, width: int, heads: int) -> Entry:
    name = f"bert_en_uncased_L-{layers}_H-{width}_A-{heads}"
    return Entry(
        name,
        lambda: sequence.bert_classifier(layers=layers, width=width, heads=heads, sequence=128, name=name),
        "text classification",
        "IMDB reviews",
        "one review, 128 tokens",
        f"CentaurusInfra/alnair open-data/gpu-sharing/NLP_BERT.py (TF-Hub small_bert/{name}, pooled output, "
        "1-unit dense head)",
        (
            "128 tokens: the bert_en_uncased_preprocess model's default sequence length",
            "the encoder is trained (trainable=True)",
        ),
        (f"small_bert/{name}",),
        None,
        ("alnair",),
    )


ALNAIR = (
    Entry(
        "mobilenet_v1",
        lambda: vision.mobilenet_v1(classes=43),
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="mobilenet_v1_100_224") + "; Keras MobileNet α = 1.0",
        FROZEN_BACKBONE,
        ("MobileNet", "mobilenet_v1_100_224"),
        4_231_976,
        ("alnair",),
        lambda: vision.mobilenet_v1(classes=1000),
    ),
    Entry(
        "efficientnet_v2_s",
        lambda: vision.efficientnet_v2_s(classes=43),
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="efficientnet_v2_imagenet1k_s") + "; layers as torchvision "
        "efficientnet_v2_s",
        FROZEN_BACKBONE,
        ("EfficientNet_v2", "EfficientNetV2-S"),
        21_458_488,
        ("alnair",),
        lambda: vision.efficientnet_v2_s(classes=1000),
    ),
    Entry(
        "inception_v3",
        lambda: vision.inception_v3(classes=43, image=224, aux=False),
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="inception_v3") + "; layers as torchvision inception_v3",
        (*FROZEN_BACKBONE, "no auxiliary classifier (the feature vector has none)"),
        ("Inception_v3", "Inception-v3"),
        27_161_264,
        ("alnair",),
        lambda: vision.inception_v3(classes=1000, image=299, aux=True),
    ),
    Entry(
        "nasnet_mobile",
        lambda: vision.nasnet_mobile(classes=43),
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="nasnet_mobile") + "; layers as Keras NASNetMobile (NASNet-A 4@1056)",
        FROZEN_BACKBONE,
        ("Nasnet_Mobile", "NASNet-Mobile", "nasnet"),
        5_289_978,
        ("alnair",),
        lambda: vision.nasnet_mobile(classes=1000),
    ),
    *(_small_bert(*config) for config in SMALL_BERTS),
    Entry(
        "dcgan",
        lambda: other.dcgan_mnist(noise=100),
        "image generation",
        "MNIST",
        "one training-step sample: a noise vector and a real 28×28 image",
        "CentaurusInfra/alnair open-data/gpu-sharing/DCGAN_MNIST.py (TensorFlow's DCGAN tutorial)",
        ("the generator runs once and the discriminator twice (real and generated) per sample",),
        ("DCGAN", "dcgan-mnist"),
        None,
        ("alnair",),
    ),
    Entry(
        "unet-mobilenet_v2",
        lambda: vision.unet_mobilenet_v2(image=128, classes=3),
        "image segmentation",
        "Oxford-IIIT Pet",
        "one 128×128 image",
        "CentaurusInfra/alnair open-data/gpu-sharing/Image_Segmentation.py (TensorFlow's segmentation "
        "tutorial: Keras MobileNetV2 encoder, pix2pix decoder)",
        ("128×128 images, 3 mask classes", "the MobileNetV2 encoder is frozen; the decoder trains"),
        ("Image Segmentation", "image-segmentation", "unet"),
        None,
        ("alnair",),
    ),
    Entry(
        "dqn-cartpole",
        lambda: other.dqn_cartpole(hidden=(100, 50), actions=2),
        "reinforcement learning",
        "CartPole-v0",
        "one sampled 2-step trajectory",
        "CentaurusInfra/alnair open-data/gpu-sharing/RL_CartPole.py (TF-Agents DQN tutorial: dense 100-50 "
        "Q-network)",
        (
            "the data set's BS column is the replay sample batch size (batch_size in the script)",
            "the Q-network runs on the observation and the target copy on the next one",
        ),
        ("Reinforcement Learning", "RL CartPole", "cartpole"),
        None,
        ("alnair",),
    ),
)

ENTRIES: tuple[Entry, ...] = GAVEL + MURI + HORUS + ALNAIR

CONVENTIONS = {
    "flops": "forward-pass FLOPs, a multiply-add counted as 2; " + FORWARD_ONLY,
    "profile": "batch-independent: *_per_sample scale with the batch size, everything else is per model; "
    "features.at_batch(profile, b) gives the features at batch size b",
    "graphs": "graph-only ONNX built by hack/catalog from the stated source, "
    "profiled by features.profile_onnx",
}


def build_catalog() -> dict[str, Any]:
    models: dict[str, dict[str, Any]] = {}
    for entry in ENTRIES:
        profile = features.profile_onnx(entry.build())
        _check_published_params(entry, profile)
        models[entry.name] = {
            "aliases": list(entry.aliases),
            "task": entry.task,
            "dataset": entry.dataset,
            "sample": entry.sample,
            "source": entry.source,
            "assumptions": list(entry.assumptions),
            "workloads": list(entry.groups),
            "published_params_checked": entry.published_params is not None,
            "profile": {name: _number(profile[name]) for name in features.PROFILE_NAMES},
        }
    _check_aliases(models)
    return {"generated_by": "hack/gen_catalog.py", "conventions": CONVENTIONS, "models": models}


def _check_published_params(entry: Entry, profile: dict[str, float]) -> None:
    if entry.published_params is None:
        return
    params = features.profile_onnx(entry.reference())["params"] if entry.reference else profile["params"]
    if params != entry.published_params:
        raise SystemExit(
            f"{entry.name}: graph has {params:,.0f} parameters, the published count is "
            f"{entry.published_params:,}; the builder is wrong"
        )


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def _check_aliases(models: dict[str, dict[str, Any]]) -> None:
    owners: dict[str, str] = {}
    for name, entry in models.items():
        for alias in [name, *entry["aliases"]]:
            key = runtime_catalog.alias_key(alias)
            if owners.setdefault(key, name) != name:
                raise SystemExit(f"alias {alias!r} of {name} collides with {owners[key]}")


def render(catalog: dict[str, Any]) -> str:
    return json.dumps(catalog, indent=1, ensure_ascii=False) + "\n"


def render_docs(catalog: dict[str, Any]) -> str:
    """docs/catalog.md: every entry with its numbers, source and assumptions."""
    lines = [
        "# Built-in model catalog",
        "",
        "Generated by `python hack/gen_catalog.py` from `horus_operator/prediction/data/catalog.json`; "
        "do not edit. How the numbers are counted: [prediction.md](prediction.md#features-and-catalog).",
        "GFLOP = forward-pass FLOPs per sample (multiply-add = 2); ✓ = parameter count checked against "
        "the published one.",
        "",
        "| model | workloads | dataset | one sample | GFLOP/sample | params (M) | act. MB/sample | aliases |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    models: dict[str, dict[str, Any]] = catalog["models"]
    for name, entry in models.items():
        profile = entry["profile"]
        checked = " ✓" if entry["published_params_checked"] else ""
        lines.append(
            f"| `{name}` | {', '.join(entry['workloads'])} | {entry['dataset']} | {entry['sample']} "
            f"| {profile['flops_per_sample'] / 1e9:.3f} | {profile['params'] / 1e6:.2f}{checked} "
            f"| {profile['activation_bytes_per_sample'] / 1e6:.1f} | {', '.join(entry['aliases'])} |"
        )
    lines += ["", "## Sources and assumptions", ""]
    for name, entry in models.items():
        lines.append(f"- **`{name}`** — {entry['source']}.")
        lines += [f"  - {assumption}" for assumption in entry["assumptions"]]
    return "\n".join(lines) + "\n"


# ---- cross-check against an independent profiler ----

MATRIX_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM")
CROSSCHECK_TOLERANCE = 1e-3


def crosscheck(entries: list[Entry]) -> int:
    """Compare 2 × onnx-tool's multiply-accumulates in the matrix ops with our conv + linear +
    attention FLOPs, per entry. Elementwise ops are left out on purpose: the tools cost them
    differently (onnx-tool charges batch norm several MACs per element). A strided ConvTranspose is
    not comparable: onnx-tool charges every output position, including the zeros the stride inserts
    (stride² × the |input|·Cout·k² multiply-adds it performs). Exit status 1 above the tolerance."""
    worst = 0.0
    for entry in entries:
        model = entry.build()
        profile = features.profile_onnx(model)
        ours = sum(profile[f"{part}_flops_per_sample"] for part in ("conv", "linear", "attention"))
        theirs = _onnx_tool_matrix_flops(model)
        difference = abs(theirs - ours) / ours
        comparable = not _has_strided_conv_transpose(model)
        worst = max(worst, difference if comparable else 0.0)
        note = "" if comparable else "  (strided ConvTranspose: not comparable)"
        print(f"{entry.name:<34} ours {ours:12.5e}  onnx-tool {theirs:12.5e}  {100 * difference:.4f}%{note}")
    print(f"largest difference {100 * worst:.4f}% (tolerance {100 * CROSSCHECK_TOLERANCE:.1f}%)")
    return 0 if worst <= CROSSCHECK_TOLERANCE else 1


def _has_strided_conv_transpose(model: onnx.ModelProto) -> bool:
    return any(
        node.op_type == "ConvTranspose"
        and any(attribute.name == "strides" and max(attribute.ints) > 1 for attribute in node.attribute)
        for node in model.graph.node
    )


def _onnx_tool_matrix_flops(model: onnx.ModelProto) -> float:
    import numpy as np
    import onnx_tool  # the [catalog] extra; only this check needs it

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:  # onnx-tool reads weights: give them zero data
        tensor.CopyFrom(onnx.numpy_helper.from_array(np.zeros(list(tensor.dims), np.float32), tensor.name))
    for value in copy.graph.input:  # batch 1
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.Clear()
                dim.dim_value = 1
    profiled = onnx_tool.Model(copy)
    profiled.graph.shape_infer()
    profiled.graph.profile()
    macs = 0.0
    for node in profiled.graph.nodemap.values():
        shapes = [profiled.graph.tensormap[name].shape for name in node.input]
        if (
            node.op_type == "LSTM"
        ):  # only onnx-tool's gate-matmul term; its gate elementwise terms are left out
            macs += (math.prod(shapes[1]) + math.prod(shapes[2])) * shapes[0][0] * shapes[0][1]
        elif node.op_type in MATRIX_OPS:
            macs += node.macs[0] if isinstance(node.macs, list | tuple) else node.macs
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 2:  # onnx-tool adds the bias; we don't
            macs -= math.prod(profiled.graph.tensormap[node.output[0]].shape)
    return 2.0 * macs


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    mode.add_argument("--crosscheck", nargs="*", metavar="NAME", help="compare FLOPs with onnx-tool")
    args = parser.parse_args()
    if args.crosscheck is not None:
        return crosscheck(
            [entry for entry in ENTRIES if not args.crosscheck or entry.name in args.crosscheck]
        )
    catalog = build_catalog()
    outputs = {CATALOG_PATH: render(catalog), DOCS_PATH: render_docs(catalog)}
    if args.check:
        stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
        for path in stale:
            print(f"{path} is stale: run python hack/gen_catalog.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"wrote {len(catalog['models'])} models to {CATALOG_PATH} and {DOCS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
