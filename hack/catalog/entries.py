"""The catalog's entries: each architecture, where its graph comes from, what one sample is, and the
assumptions behind its numbers (docs/catalog.md prints them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import onnx

from catalog import graph_files

TORCHVISION = "torchvision.models (ImageNet, 3×224×224, 1000 classes)"
IMAGENET_SAMPLE = "one 3×224×224 image"
TORCHVISION_EXPORT = "torchvision.models.get_model(name, weights=None) exported with torch.onnx"
HF = "Hugging Face transformers"
EAGER = "attn_implementation='eager': Q·Kᵀ and P·V are explicit MatMuls"


@dataclass(frozen=True)
class Entry:
    name: str
    task: str
    dataset: str
    sample: str  # what one unit of batch size is
    source: str  # the code the graph follows
    assumptions: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    published_params: int | None = None  # checked against the graph when known
    groups: tuple[str, ...] = field(default=())  # which workload sets use it: gavel, muri, horus, alnair
    # The published configuration the count applies to, when the entry differs from it (e.g. the
    # entry has a 43-class head, the published model 1000 classes): its key in catalog/torch_models.py,
    # whose parameters `--from-torch` checks against published_params instead of the graph's.
    reference: str | None = None
    # The key of the reference module in catalog/torch_models.py, when not the entry's name.
    module: str | None = None

    @property
    def key(self) -> str:
        return self.module or self.name

    def graph(self) -> onnx.ModelProto:
        """The entry's exported graph, as the package ships it."""
        return graph_files.load(self.name)


def _classifier(
    name: str,
    params: int,
    *aliases: str,
    size: int = 224,
    module: str | None = None,
    note: str = "",
    groups: tuple[str, ...] = (),
) -> Entry:
    crop = (
        "224×224 crops as torchvision's ImageNet recipe trains them"
        if size == 224
        else f"{size}×{size} crops, the resolution the architecture is defined at"
    )
    return Entry(
        name,
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE if size == 224 else f"one 3×{size}×{size} image",
        f"{TORCHVISION}: {module or name}; {TORCHVISION_EXPORT}",
        (crop, *((note,) if note else ())),
        aliases,
        params,
        groups,
        module=module,
    )


def _vgg(name: str, params: int, *aliases: str, groups: tuple[str, ...]) -> Entry:
    entry = _classifier(name, params, *aliases, module=f"{name}-reshapeable", groups=groups)
    note = (
        "its AdaptiveAvgPool2d((7, 7)) (the identity at 224×224) exported as a global average expanded "
        "to 7×7: torchvision's shapes at every input size, so the graph can be re-shaped "
        "(hack/catalog/torch_models.py _ReshapeableAdaptivePool)"
    )
    return dataclasses.replace(
        entry, source=f"{TORCHVISION}: {name}; {TORCHVISION_EXPORT}", assumptions=(*entry.assumptions, note)
    )


GAVEL = (
    Entry(
        "resnet18",
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "Gavel workloads/pytorch/image_classification/cifar10 (kuangliu/pytorch-cifar ResNet18: 3×3 stem, "
        "no max-pool, 10 classes): torchvision's resnet18 with that stem and head, exported with torch.onnx",
        (
            "Gavel's ResNet-18 job trains on CIFAR-10; Muri's resnet18 jobs are ImageNet-sized: see "
            "resnet18-imagenet",
        ),
        ("ResNet-18", "resnet18-cifar10", "resnet18_cifar"),
        None,
        ("gavel", "muri"),
        module="resnet18-cifar",
    ),
    Entry(
        "resnet50",
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE,
        "Gavel workloads/pytorch/image_classification/imagenet main.py -a resnet50 (torchvision resnet50); "
        + TORCHVISION_EXPORT,
        ("224×224 crops (RandomResizedCrop(224) in the ImageNet example)",),
        ("ResNet-50", "resnet-50-imagenet"),
        25_557_032,
        ("gavel", "horus"),
    ),
    Entry(
        "transformer",
        "translation",
        "Multi30k (en-de, tokenized, lower-cased)",
        "one source/target sentence pair",
        "Gavel workloads/pytorch/translation (attention-is-all-you-need-pytorch: 6+6 layers, d_model 512, "
        "d_inner 2048, 8 heads, d_k = d_v = 64, Conv1d feed-forward, -proj_share_weight), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
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
        "language modelling",
        "Wikitext-2",
        "one 35-token column of a bptt chunk",
        "Gavel workloads/pytorch/language_modeling (pytorch/examples word_language_model RNNModel: "
        "LSTM, emsize 200, nhid 200, 2 layers, bptt 35, untied), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        ("Wikitext-2 vocabulary of 33,278 words (the example's Corpus dictionary)",),
        ("LM", "LSTM", "lstm_lm", "word-lm", "lstm-wikitext2"),
        None,
        ("gavel", "horus"),
    ),
    Entry(
        "recommendation",
        "recommendation (collaborative filtering)",
        "MovieLens-20M",
        "one user's item vector",
        "Gavel workloads/pytorch/recommendation (recoder DynamicAutoencoder hidden_layers=[200], tanh), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
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
        "reinforcement learning",
        "Atari Pong",
        "one forward step on one frame",
        "Gavel workloads/pytorch/rl (rl_a3c_pytorch A3Clstm: 4 conv/max-pool stages, LSTMCell(1024, 512)), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "1×80×80 grey frames and 6 Pong actions (the repository's environment config)",
            "Gavel reports batch size 1: each worker process steps one environment",
            "the LSTMCell is written as one step of nn.LSTM (the same arithmetic and parameters), as the GPU "
            "runs it: two GEMMs and one fused pointwise kernel",
            "the LSTM state carried from the previous step is an input",
        ),
        ("A3C",),
        None,
        ("gavel",),
    ),
    Entry(
        "cyclegan",
        "image-to-image translation",
        "monet2photo",
        "one unaligned image pair (A, B) through a whole training step",
        "Gavel workloads/pytorch/cyclegan (PyTorch-GAN cyclegan.py: ResNet generators with 9 residual "
        "blocks, PatchGAN discriminators, instance norm), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "256×256 crops (img_height/img_width defaults), batch size 1",
            "the graph holds one training step's forward work: 6 generator and 6 discriminator passes",
            "the discriminators' fake batches come from the replay buffers, graph inputs beside the pair",
        ),
        ("CycleGAN",),
        None,
        ("gavel",),
    ),
)

MURI = (
    Entry(
        "gpt2",
        "language modelling",
        "a text corpus (Muri's train_dir; the code does not name it)",
        "one 1,024-token block",
        "Muri cluster_exp/workloads/models/nlp_model.py (Hugging Face GPT2LMHeadModel with the default "
        "GPT2Config: 12 layers, 768 wide, 12 heads), exported with torch.onnx",
        (
            "block size 1,024 tokens (tokenizer.max_len_single_sentence for gpt2)",
            "LM head tied to the token embedding, as in GPT2LMHeadModel",
            EAGER,
        ),
        ("GPT-2", "gpt-2"),
        124_439_808,
        ("muri",),
    ),
    Entry(
        "bert",
        "masked language modelling",
        "a text corpus (Muri's train_dir; the code does not name it)",
        "one 512-token block",
        "Muri cluster_exp/workloads/models/nlp_model.py (Hugging Face BertForMaskedLM with the default "
        "BertConfig: BERT-base, 12 layers, 768 wide), exported with torch.onnx",
        (
            "block size 510 tokens + [CLS] and [SEP] = 512 (bert-base-uncased max_len_single_sentence)",
            "MLM head over every position (masking picks the loss positions, not the compute)",
            EAGER,
        ),
        ("BERT", "bert-base"),
        109_514_298,
        ("muri",),
    ),
    _vgg("vgg16", 138_357_544, "VGG-16", groups=("muri", "horus")),
    _vgg("vgg19", 143_667_240, "VGG-19", groups=("muri", "horus")),
    _classifier(
        "shufflenet_v2_x1_0",
        2_278_604,
        "ShuffleNetV2",
        "shufflenet-v2",
        groups=("muri", "horus"),
    ),
    Entry(
        "a2c",
        "reinforcement learning",
        "Atari Breakout",
        "one observation (batch size = number of parallel environments)",
        "Muri cluster_exp/workloads/models/a2c_model.py (DeepRL CategoricalActorCriticNet(NatureConvBody)), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
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
        "reinforcement learning",
        "Atari Breakout",
        "one replayed transition",
        "Muri cluster_exp/workloads/models/dqn_model.py (DeepRL VanillaNet(NatureConvBody), DQNAgent), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "4 stacked 84×84 frames, 4 Breakout actions",
            "each transition runs the online network on the state and the target network on the next state; "
            "the target copy is frozen, so its weights are not counted as parameters",
        ),
        ("DQN",),
        None,
        ("muri",),
    ),
    _classifier(
        "resnet18-imagenet",
        11_689_512,
        "resnet18_imagenet",
        module="resnet18",
        groups=("muri", "horus"),
    ),
)

HORUS = (
    _classifier("resnet34", 21_797_672, "ResNet-34", groups=("horus",)),
    _classifier("resnet101", 44_549_160, "ResNet-101", groups=("horus",)),
    _classifier("resnet152", 60_192_808, "ResNet-152", groups=("horus",)),
    _classifier("resnext50_32x4d", 25_028_904, "ResNeXt-50", "resnext50", groups=("horus",)),
    _classifier("resnext101_32x8d", 88_791_336, "ResNeXt-101", "resnext101", groups=("horus",)),
    _vgg("vgg11", 132_863_336, "VGG-11", groups=("horus",)),
    _vgg("vgg13", 133_047_848, "VGG-13", groups=("horus",)),
    _classifier("densenet121", 7_978_856, "DenseNet-121", "densenet", groups=("horus",)),
    _classifier("densenet169", 14_149_480, "DenseNet-169", groups=("horus",)),
    _classifier("densenet201", 20_013_928, "DenseNet-201", groups=("horus",)),
    _classifier("mobilenet_v2", 3_504_872, "MobileNetV2", "mobilenet-v2", groups=("horus",)),
    _classifier("shufflenet_v2_x0_5", 1_366_792, groups=("horus",)),
    _classifier("shufflenet_v2_x1_5", 3_503_624, groups=("horus",)),
    _classifier("shufflenet_v2_x2_0", 7_393_996, groups=("horus",)),
    _classifier("mnasnet0_5", 2_218_512, groups=("horus",)),
    _classifier("mnasnet1_0", 4_383_312, "MNASNet", "mnasnet", groups=("horus",)),
    _classifier(
        "efficientnet_b0", 5_288_548, "EfficientNet", "efficientnet", "EfficientNet-B0", groups=("horus",)
    ),
    _classifier("squeezenet1_0", 1_248_424, "SqueezeNet", "squeezenet", groups=("horus",)),
    _classifier("squeezenet1_1", 1_235_496, "SqueezeNet-1.1", groups=("horus",)),
    Entry(
        "googlenet",
        "image classification",
        "ImageNet",
        IMAGENET_SAMPLE,
        f"{TORCHVISION}: googlenet; {TORCHVISION_EXPORT}",
        ("trained from scratch, so both auxiliary classifiers run (aux_logits)",),
        ("GoogLeNet", "inception-v1"),
        13_004_888,
        ("horus",),
    ),
    Entry(
        "dpn92",
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "kuangliu/pytorch-cifar DPN92 (DPN is not in torchvision), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        ("CIFAR-10 input: the Horus papers do not state the DPN variant or dataset",),
        ("DPN", "DPN-92"),
        None,
        ("horus",),
    ),
    Entry(
        "pyramidnet110",
        "image classification",
        "CIFAR-10",
        "one 3×32×32 image",
        "dyhan0920/PyramidNet-PyTorch PyramidNet(depth 110, alpha 48, basic blocks, CIFAR), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
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
        "language modelling",
        "Wikitext-2",
        "one 35-token sequence",
        "pytorch/examples word_language_model TransformerModel (emsize 200, nhid 200, 2 layers, 2 heads), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
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


def small_bert_name(layers: int, width: int, heads: int) -> str:
    return f"bert_en_uncased_L-{layers}_H-{width}_A-{heads}"


def _small_bert(layers: int, width: int, heads: int) -> Entry:
    name = small_bert_name(layers, width, heads)
    return Entry(
        name,
        "text classification",
        "IMDB reviews",
        "one review, 128 tokens",
        f"CentaurusInfra/alnair open-data/gpu-sharing/NLP_BERT.py (TF-Hub small_bert/{name}, pooled output, "
        "1-unit dense head), as Hugging Face transformers BertModel exported with torch.onnx",
        (
            "128 tokens: the bert_en_uncased_preprocess model's default sequence length",
            "the encoder is trained (trainable=True)",
            EAGER,
        ),
        (f"small_bert/{name}",),
        None,
        ("alnair",),
    )


ALNAIR = (
    Entry(
        "mobilenet_v1",
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="mobilenet_v1_100_224")
        + "; Keras MobileNet α = 1.0, written in hack/catalog/torch_models.py and exported with torch.onnx",
        FROZEN_BACKBONE,
        ("MobileNet", "mobilenet_v1_100_224"),
        4_231_976,
        ("alnair",),
        reference="mobilenet_v1-imagenet",
    ),
    Entry(
        "efficientnet_v2_s",
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="efficientnet_v2_imagenet1k_s") + "; torchvision "
        "efficientnet_v2_s(num_classes=43) exported with torch.onnx",
        FROZEN_BACKBONE,
        ("EfficientNet_v2", "EfficientNetV2-S"),
        21_458_488,
        ("alnair",),
        reference="efficientnet_v2_s",
        module="efficientnet_v2_s-gtsrb",
    ),
    Entry(
        "inception_v3",
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="inception_v3") + "; torchvision inception_v3(num_classes=43, "
        "aux_logits=False) exported with torch.onnx",
        (*FROZEN_BACKBONE, "no auxiliary classifier (the feature vector has none)"),
        ("Inception_v3", "Inception-v3"),
        27_161_264,
        ("alnair",),
        reference="inception_v3",
        module="inception_v3-gtsrb",
    ),
    Entry(
        "nasnet_mobile",
        "image classification",
        "GTSRB",
        GTSRB_SAMPLE,
        ALNAIR_CLASSIFIER.format(hub="nasnet_mobile") + "; Keras NASNetMobile (NASNet-A 4@1056), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        FROZEN_BACKBONE,
        ("Nasnet_Mobile", "NASNet-Mobile", "nasnet"),
        5_289_978,
        ("alnair",),
        reference="nasnet_mobile-imagenet",
    ),
    *(_small_bert(*config) for config in SMALL_BERTS),
    Entry(
        "dcgan",
        "image generation",
        "MNIST",
        "one training-step sample: a noise vector and a real 28×28 image",
        "CentaurusInfra/alnair open-data/gpu-sharing/DCGAN_MNIST.py (TensorFlow's DCGAN tutorial), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        ("the generator runs once and the discriminator twice (real and generated) per sample",),
        ("DCGAN", "dcgan-mnist"),
        None,
        ("alnair",),
    ),
    Entry(
        "unet-mobilenet_v2",
        "image segmentation",
        "Oxford-IIIT Pet",
        "one 128×128 image",
        "CentaurusInfra/alnair open-data/gpu-sharing/Image_Segmentation.py (TensorFlow's segmentation "
        "tutorial: Keras MobileNetV2 encoder, pix2pix decoder), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        ("128×128 images, 3 mask classes", "the MobileNetV2 encoder is frozen; the decoder trains"),
        ("Image Segmentation", "image-segmentation", "unet"),
        None,
        ("alnair",),
    ),
    Entry(
        "dqn-cartpole",
        "reinforcement learning",
        "CartPole-v0",
        "one sampled 2-step trajectory",
        "CentaurusInfra/alnair open-data/gpu-sharing/RL_CartPole.py (TF-Agents DQN tutorial: dense 100-50 "
        "Q-network), written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "the data set's BS column is the replay sample batch size (batch_size in the script)",
            "the Q-network runs on the observation and the target copy on the next one",
        ),
        ("Reinforcement Learning", "RL CartPole", "cartpole"),
        None,
        ("alnair",),
    ),
)

EXPORTED_CLASSIFIERS = (
    _classifier("alexnet", 61_100_840, "AlexNet"),
    _classifier("resnext101_64x4d", 83_455_272, "ResNeXt-101-64x4d"),
    _classifier("wide_resnet50_2", 68_883_240, "WRN-50-2", "Wide ResNet-50-2"),
    _classifier("wide_resnet101_2", 126_886_696, "WRN-101-2", "Wide ResNet-101-2"),
    _classifier("vgg11_bn", 132_868_840, "VGG-11-BN"),
    _classifier("vgg13_bn", 133_053_736, "VGG-13-BN"),
    _classifier("vgg16_bn", 138_365_992, "VGG-16-BN"),
    _classifier("vgg19_bn", 143_678_248, "VGG-19-BN"),
    _classifier("densenet161", 28_681_000, "DenseNet-161"),
    _classifier("mobilenet_v3_small", 2_542_856, "MobileNetV3-Small"),
    _classifier("mobilenet_v3_large", 5_483_032, "MobileNetV3-Large", "MobileNetV3"),
    _classifier("mnasnet0_75", 3_170_208),
    _classifier("mnasnet1_3", 6_282_256),
    _classifier("efficientnet_b1", 7_794_184, "EfficientNet-B1", size=240),
    _classifier(
        "efficientnet_b2",
        9_109_994,
        "EfficientNet-B2",
        size=260,
        note="torchvision's ported weights evaluate at 288×288",
    ),
    _classifier("efficientnet_b3", 12_233_232, "EfficientNet-B3", size=300),
    _classifier(
        "efficientnet_v2_s-imagenet",
        21_458_488,
        "efficientnet_v2_s_imagenet",
        size=300,
        module="efficientnet_v2_s",
        note="300×300: the train crop of torchvision's EfficientNetV2 recipe (it evaluates at 384); "
        "`efficientnet_v2_s` is alnair's 43-class GTSRB job",
    ),
    _classifier(
        "inception_v3-imagenet",
        27_161_264,
        "inception_v3_imagenet",
        size=299,
        module="inception_v3",
        note="trained from scratch, so the auxiliary classifier runs (aux_logits); `inception_v3` is "
        "alnair's 43-class GTSRB job",
    ),
    _classifier("regnet_x_400mf", 5_495_976, "RegNetX-400MF"),
    _classifier("regnet_x_800mf", 7_259_656, "RegNetX-800MF"),
    _classifier("regnet_x_1_6gf", 9_190_136, "RegNetX-1.6GF"),
    _classifier("regnet_x_3_2gf", 15_296_552, "RegNetX-3.2GF"),
    _classifier("regnet_y_400mf", 4_344_144, "RegNetY-400MF"),
    _classifier("regnet_y_800mf", 6_432_512, "RegNetY-800MF"),
    _classifier("regnet_y_1_6gf", 11_202_430, "RegNetY-1.6GF"),
    _classifier("regnet_y_3_2gf", 19_436_338, "RegNetY-3.2GF"),
    _classifier("regnet_y_128gf", 644_812_894, "RegNetY-128GF"),
    _classifier("vit_b_16", 86_567_656, "ViT-B/16", "vit-base-patch16-224"),
    _classifier("vit_b_32", 88_224_232, "ViT-B/32", "vit-base-patch32-224"),
    _classifier("vit_l_16", 304_326_632, "ViT-L/16", "vit-large-patch16-224"),
    _classifier("convnext_tiny", 28_589_128, "ConvNeXt-T", "ConvNeXt"),
    _classifier("convnext_small", 50_223_688, "ConvNeXt-S"),
    _classifier("convnext_large", 197_767_336, "ConvNeXt-L"),
    _classifier("swin_t", 28_288_354, "Swin-T", "Swin", "swin-tiny"),
    _classifier("swin_s", 49_606_258, "Swin-S", "swin-small"),
    _classifier("swin_v2_t", 28_351_570, "SwinV2-T", size=256),
    _classifier("swin_v2_s", 49_737_442, "SwinV2-S", size=256),
    _classifier("maxvit_t", 30_919_624, "MaxViT-T", "MaxViT"),
)


def _segmentation(name: str, params: int, *aliases: str) -> Entry:
    aux = not name.startswith("lraspp")
    return Entry(
        name,
        "semantic segmentation",
        "COCO (the 20 Pascal VOC categories + background)",
        "one 3×480×480 crop",
        f"torchvision.models.segmentation: {name}(num_classes=21{', aux_loss=True' if aux else ''}); "
        f"{TORCHVISION_EXPORT}",
        (
            "480×480 crops (torchvision references/segmentation: base size 520, crop size 480)",
            *(
                ("the auxiliary FCN head runs (--aux-loss, as the published weights were trained)",)
                if aux
                else ()
            ),
        ),
        aliases,
        params,
    )


def _detection(name: str, params: int, *aliases: str, two_stage: bool) -> Entry:
    return Entry(
        name,
        "object detection",
        "COCO",
        "one image (3×800×1088)",
        f"torchvision.models.detection: {name}(num_classes=91), the fixed-shape part of its training step "
        "(hack/catalog/torch_models.py _DenseDetector) exported with torch.onnx",
        (
            "a 640×480 COCO image resized to the 800-pixel short side and padded to a multiple of 32: "
            "3×800×1088",
            "backbone with FrozenBatchNorm2d, as the recipe builds it on an ImageNet backbone",
            "in the graph: backbone, FPN and the dense heads"
            + (
                "; the box head on the 512 sampled proposals (box_batch_size_per_image) at 7×7"
                if two_stage
                else ""
            ),
            "not in the graph (data-dependent shapes, little arithmetic): anchor matching, "
            + ("proposal selection, RoI Align, " if two_stage else "")
            + "the losses",
            "the whole model cannot be profiled: torch.export stops at its data-dependent control flow, "
            "and the TorchScript exporter's graph is the inference one (resize, NMS) with data-dependent "
            "shapes",
        ),
        aliases,
        params,
    )


DENSE_PREDICTION = (
    _segmentation("fcn_resnet50", 35_322_218, "FCN-ResNet50"),
    _segmentation("deeplabv3_resnet50", 42_004_074, "DeepLabV3-ResNet50", "deeplabv3"),
    _segmentation("deeplabv3_mobilenet_v3_large", 11_029_328, "DeepLabV3-MobileNetV3"),
    _segmentation("lraspp_mobilenet_v3_large", 3_221_538, "LR-ASPP", "lraspp"),
    _detection("retinanet_resnet50_fpn", 34_014_999, "RetinaNet", two_stage=False),
    _detection("fasterrcnn_mobilenet_v3_large_fpn", 19_386_354, "Faster R-CNN MobileNetV3", two_stage=True),
)


def _language_model(
    name: str,
    sample: str,
    source: str,
    assumptions: tuple[str, ...],
    *aliases: str,
    task: str = "language modelling",
) -> Entry:
    return Entry(name, task, "a text corpus", sample, source, (*assumptions, EAGER), aliases)


SEQUENCE_MODELS = (
    _language_model(
        "gpt2-medium",
        "one 1,024-token block",
        f"{HF} GPT2LMHeadModel(GPT2Config(n_embd=1024, n_layer=24, n_head=16)) (gpt2-medium's shape), "
        "random initialisation, exported with torch.onnx",
        ("block size 1,024 tokens (n_positions)", "LM head tied to the token embedding"),
        "GPT-2-medium",
        "gpt2-355m",
    ),
    _language_model(
        "bert-large",
        "one 512-token block",
        f"{HF} BertForMaskedLM(BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, "
        "intermediate_size=4096)) (bert-large-uncased's shape), exported with torch.onnx",
        (
            "512-token blocks",
            "MLM head over every position (masking picks the loss positions, not the compute)",
        ),
        "BERT-large",
        task="masked language modelling",
    ),
    _language_model(
        "distilbert",
        "one 512-token block",
        f"{HF} DistilBertForMaskedLM(DistilBertConfig()) (distilbert-base-uncased: 6 layers, 768 wide), "
        "exported with torch.onnx",
        ("512-token blocks", "MLM head over every position; the distillation teacher is not in the graph"),
        "DistilBERT",
        "distilbert-base",
        task="masked language modelling",
    ),
    _language_model(
        "llama-160m",
        "one 2,048-token block",
        f"{HF} LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=3072, "
        "num_hidden_layers=12, num_attention_heads=12, max_position_embeddings=2048)): a Llama-style "
        "decoder of 162M parameters (RMSNorm, rotary positions, SwiGLU, untied LM head)",
        ("2,048-token blocks (max_position_embeddings)", "32,000-token vocabulary (the Llama tokenizer)"),
        "llama-small",
    ),
    _language_model(
        "tinyllama-1.1b",
        "one 2,048-token block",
        f"{HF} LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, "
        "num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4, "
        "max_position_embeddings=2048)): TinyLlama-1.1B's shape, 1.1B parameters, grouped-query attention",
        ("2,048-token blocks (max_position_embeddings)", "32,000-token vocabulary (the Llama tokenizer)"),
        "TinyLlama",
        "llama-1.1b",
    ),
    Entry(
        "wav2vec2-base",
        "speech recognition (CTC fine-tuning)",
        "LibriSpeech",
        "one 10 s utterance (160,000 samples at 16 kHz)",
        f"{HF} Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=32)) (wav2vec 2.0 base: 7 convolutional feature "
        "layers, 12 transformer layers, 768 wide), exported with torch.onnx",
        (
            "10-second utterances (LibriSpeech averages about 12 s)",
            "32-character CTC vocabulary (facebook/wav2vec2-base-960h's)",
            "SpecAugment masking is not in the graph (it masks, it adds no arithmetic), nor its 768-value "
            "mask embedding (masked_spec_embed) among the parameters",
            EAGER,
        ),
        ("wav2vec2", "wav2vec 2.0"),
    ),
    Entry(
        "conformer-s",
        "speech recognition (CTC)",
        "LibriSpeech",
        "one 10 s utterance (1,000 frames of 80 log-mel bins)",
        "torchaudio.models.Conformer(input_dim=144, num_heads=4, ffn_dim=576, num_layers=16, "
        "depthwise_conv_kernel_size=31), Gulati et al. 2020's Conformer-S, behind a 4× convolutional "
        "subsampling (two 3×3 stride-2 convolutions) and a linear CTC head (hack/catalog/torch_models.py)",
        (
            "10-second utterances at a 10 ms hop: 1,000 frames, 249 after subsampling",
            "a CTC head over 29 characters instead of the paper's single-layer LSTM decoder",
        ),
        ("Conformer",),
    ),
)

OTHER_MODELS = (
    Entry(
        "pointnet",
        "point-cloud classification",
        "ModelNet40",
        "one cloud of 1,024 points",
        "charlesq34/pointnet classification network as fxia22/pointnet.pytorch writes it (PointNetCls, "
        "feature_transform=True: input and 64-d feature transform nets), written in "
        "hack/catalog/torch_models.py and exported with torch.onnx",
        ("1,024 points per cloud (the paper's ModelNet40 setting)", "40 classes"),
        ("PointNet",),
    ),
    Entry(
        "neumf",
        "recommendation (implicit feedback)",
        "MovieLens-20M",
        "one (user, item) pair",
        "mlcommons/training recommendation/pytorch/neumf.py (NCF, He et al. 2017: GMF and MLP towers, "
        "mf_dim 64, layers 256-256-128-64), written in hack/catalog/torch_models.py and exported with "
        "torch.onnx",
        ("138,493 users and 26,744 items (ML-20M)", "negative samples are further pairs in the batch"),
        ("NeuMF", "NCF"),
    ),
    Entry(
        "dlrm",
        "recommendation (click-through rate)",
        "Criteo Kaggle Display Advertising",
        "one impression (13 dense and 26 categorical features)",
        "facebookresearch/dlrm dlrm_s_pytorch.py DLRM_Net with its Criteo Kaggle configuration "
        "(--arch-sparse-feature-size=16 --arch-mlp-bot=13-512-256-64-16 --arch-mlp-top=512-256-1, dot "
        "interaction), written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "the 26 embedding tables have the Kaggle data set's category counts (33.8M rows, 540M "
            "parameters): the small DLRM configuration; Terabyte's is larger",
            "one category per table and sample, so each embedding bag is one row look-up",
        ),
        ("DLRM", "dlrm-small", "dlrm-kaggle"),
    ),
    Entry(
        "dcgan-64",
        "image generation",
        "CelebA (64×64)",
        "one training-step sample: a noise vector and a real 64×64 image",
        "pytorch/examples dcgan/main.py (nz 100, ngf = ndf = 64, batch norm), written in "
        "hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "64×64 RGB images (--imageSize 64)",
            "the generator runs once and the discriminator three times per sample (real, detached fake, "
            "fake for the generator's loss)",
        ),
        ("dcgan64", "dcgan-celeba"),
    ),
    Entry(
        "cyclegan-generator",
        "image-to-image translation",
        "any unpaired 256×256 set (horse2zebra, monet2photo)",
        "one 3×256×256 image through one generator",
        "junyanz/pytorch-CycleGAN-and-pix2pix networks.ResnetGenerator (resnet_9blocks, ngf 64, instance "
        "norm), written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "one generator pass only (inference, or a building block); a CycleGAN training step is "
            "`cyclegan` (6 generator and 6 discriminator passes)",
        ),
        ("resnet_9blocks",),
    ),
    Entry(
        "pix2pix",
        "image-to-image translation (paired)",
        "facades / maps / cityscapes (256×256 pairs)",
        "one aligned image pair (A, B) through a whole training step",
        "junyanz/pytorch-CycleGAN-and-pix2pix pix2pix_model.py (unet_256 generator with batch norm and "
        "dropout, 70×70 PatchGAN on the 6-channel pair), written in hack/catalog/torch_models.py and "
        "exported with torch.onnx",
        (
            "256×256 crops, batch size 1 as the repository trains pix2pix",
            "the generator runs once and the discriminator three times (fake for D, real, fake for G)",
        ),
        ("Pix2Pix",),
    ),
    Entry(
        "ppo",
        "reinforcement learning",
        "MuJoCo HalfCheetah",
        "one observation (17 values)",
        "vwxyzjn/cleanrl ppo_continuous_action.py Agent (separate 64-64 tanh actor and critic MLPs, a "
        "state-independent log std), written in hack/catalog/torch_models.py and exported with torch.onnx",
        ("HalfCheetah: 17 observations, 6 actions", "one forward pass of actor and critic per observation"),
        ("PPO", "ppo-mujoco"),
    ),
    Entry(
        "td3",
        "reinforcement learning",
        "MuJoCo HalfCheetah",
        "one replayed transition",
        "sfujim/TD3 TD3.py (256-256 actor, twin 256-256 critics, target networks, delayed policy update), "
        "written in hack/catalog/torch_models.py and exported with torch.onnx",
        (
            "HalfCheetah: 17 observations, 6 actions",
            "per transition: the target actor and target critics on the next state, both critics on the "
            "pair, and the actor update through Q1 (which TD3 runs every 2nd step: an upper bound)",
            "the target networks are Polyak-averaged copies, so their weights are not counted as parameters",
        ),
        ("TD3",),
    ),
)

ENTRIES: tuple[Entry, ...] = (
    GAVEL + MURI + HORUS + ALNAIR + EXPORTED_CLASSIFIERS + DENSE_PREDICTION + SEQUENCE_MODELS + OTHER_MODELS
)
