"""Reference PyTorch modules for the catalog's entries (needs torch; `--from-torch` only).

Each builder returns (module, example inputs at batch size 1). torchvision and transformers models
come from those packages, built without weights (random initialisation; no download). Models with
no reference package are small modules written here after the paper's reference code, cited in the
entry's source in catalog/entries.py.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import torch
import torchvision
from torch import nn

from catalog.entries import SMALL_BERTS, small_bert_name

Built = tuple[nn.Module, tuple[torch.Tensor, ...]]


def _image(size: int | tuple[int, int], channels: int = 3) -> torch.Tensor:
    height, width = (size, size) if isinstance(size, int) else size
    return torch.randn(1, channels, height, width)


class _Outputs(nn.Module):
    """A module whose forward returns a dict or a dataclass, as a tuple of tensors."""

    def __init__(self, inner: nn.Module, keys: tuple[str, ...]) -> None:
        super().__init__()
        self.inner, self.keys = inner, keys

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.inner(*inputs)
        return tuple(out[key] if isinstance(out, dict) else getattr(out, key) for key in self.keys)


class _WithAuxiliaryHeads(nn.Module):
    """GoogLeNet / Inception-v3 as trained: the auxiliary classifiers run (the model checks its own
    `training` flag for them); every submodule stays in eval mode (batch norm, dropout)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.inner.training = True
        try:
            return tuple(self.inner(images))
        finally:
            self.inner.training = False


# ---- torchvision classification ----

CLASSIFICATION_SIZES = {
    "inception_v3": 299,
    "efficientnet_b1": 240,
    "efficientnet_b2": 260,
    "efficientnet_b3": 300,
    "efficientnet_v2_s": 300,
    "swin_v2_t": 256,
    "swin_v2_s": 256,
}
AUXILIARY_HEADS = frozenset({"googlenet", "inception_v3"})


def torchvision_classifier(
    name: str, *, classes: int = 1000, size: int | None = None, aux: bool = True
) -> Built:
    options: dict = {"weights": None, "num_classes": classes}
    aux = aux and name in AUXILIARY_HEADS
    if name in AUXILIARY_HEADS:
        options |= {"aux_logits": aux, "init_weights": False}
    module = torchvision.models.get_model(name, **options)
    if aux:
        module = _WithAuxiliaryHeads(module)
    return module, (_image(size or CLASSIFICATION_SIZES.get(name, 224)),)


# ---- segmentation and detection ----

SEGMENTATION_CROP = 480  # torchvision references/segmentation: --crop-size 480 (base size 520)


def torchvision_segmentation(name: str) -> Built:
    aux = not name.startswith("lraspp")
    module = torchvision.models.get_model(
        name, weights=None, weights_backbone=None, num_classes=21, aux_loss=aux or None
    )
    return _Outputs(module, ("out", "aux") if aux else ("out",)), (_image(SEGMENTATION_CROP),)


DETECTION_IMAGE = (800, 1088)  # a 640×480 COCO image resized to short side 800, padded to 32


class _DenseDetector(nn.Module):
    """The fixed-shape part of a torchvision detector's training step: backbone + FPN and the dense
    heads on one padded image, and for two-stage models the box head on the 512 sampled proposals
    per image (box_batch_size_per_image) pooled to 7×7. Anchor matching, proposal sampling, RoI
    Align and the losses have data-dependent shapes and little arithmetic: they are not in it."""

    def __init__(self, model: nn.Module, proposals: int = 0) -> None:
        super().__init__()
        self.model, self.proposals = model, proposals

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        features = list(self.model.backbone(images).values())
        if not self.proposals:  # one-stage (RetinaNet): classification and box regression heads
            head = self.model.head(features)
            return head["cls_logits"], head["bbox_regression"]
        objectness, deltas = self.model.rpn.head(features)
        pooled = features[0].new_zeros(self.proposals, features[0].shape[1], 7, 7) + features[0].mean()
        scores, boxes = self.model.roi_heads.box_predictor(self.model.roi_heads.box_head(pooled))
        return (*objectness, *deltas, scores, boxes)


def _frozen_batch_norm(module: nn.Module) -> nn.Module:
    """torchvision's detection recipes start from an ImageNet backbone with FrozenBatchNorm2d
    (statistics and affine terms are buffers); without weights the builders use BatchNorm2d."""
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            frozen = torchvision.ops.FrozenBatchNorm2d(child.num_features, eps=child.eps)
            setattr(module, name, frozen)
        else:
            _frozen_batch_norm(child)
    return module


def torchvision_detection(name: str) -> Built:
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None, num_classes=91)
    _frozen_batch_norm(model.backbone)
    proposals = 512 if "rcnn" in name else 0
    return _DenseDetector(model, proposals), (_image(DETECTION_IMAGE),)


# ---- Hugging Face transformers (configs built in code; no hub access) ----


class _Logits(nn.Module):
    def __init__(self, inner: nn.Module, field: str = "logits") -> None:
        super().__init__()
        self.inner, self.field = inner, field

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return getattr(self.inner(inputs, return_dict=True), self.field)


def _eager(config):
    config._attn_implementation = "eager"  # explicit Q·Kᵀ and P·V MatMuls, no fused attention
    return config


def _tokens(length: int, vocabulary: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, vocabulary, (1, length)),)


def gpt2(*, width: int, layers: int, heads: int, sequence: int = 1024) -> Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = _eager(GPT2Config(n_embd=width, n_layer=layers, n_head=heads, use_cache=False))
    return _Logits(GPT2LMHeadModel(config)), _tokens(sequence, config.vocab_size)


def bert_mlm(*, width: int, layers: int, heads: int, inner: int, sequence: int = 512) -> Built:
    from transformers import BertConfig, BertForMaskedLM

    config = _eager(
        BertConfig(
            hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=inner
        )
    )
    return _Logits(BertForMaskedLM(config)), _tokens(sequence, config.vocab_size)


def distilbert_mlm(sequence: int = 512) -> Built:
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    config = _eager(DistilBertConfig())
    return _Logits(DistilBertForMaskedLM(config)), _tokens(sequence, config.vocab_size)


def llama(
    *, width: int, inner: int, layers: int, heads: int, kv_heads: int, sequence: int, vocabulary: int = 32000
) -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = _eager(
        LlamaConfig(
            vocab_size=vocabulary,
            hidden_size=width,
            intermediate_size=inner,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            max_position_embeddings=sequence,
            use_cache=False,
        )
    )
    return _Logits(LlamaForCausalLM(config)), _tokens(sequence, vocabulary)


def wav2vec2_ctc(seconds: int = 10) -> Built:
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    config = _eager(Wav2Vec2Config(vocab_size=32))
    return _Logits(Wav2Vec2ForCTC(config)), (torch.randn(1, 16000 * seconds),)


# ---- speech: torchaudio ----


class _ConformerCTC(nn.Module):
    """Conformer-S (Gulati et al. 2020, table 1: 16 blocks, width 144, 4 heads, kernel 32 (31 in
    torchaudio's odd-sized depthwise convolution)) on 80 log-mel bins: the paper's 4× convolutional
    subsampling (two 3×3 stride-2 convolutions, ESPnet's Conv2dSubsampling), torchaudio's Conformer
    blocks, a linear CTC head over 29 characters (the paper's 1-layer LSTM decoder is not used)."""

    def __init__(self, mels: int = 80, width: int = 144, vocabulary: int = 29) -> None:
        from torchaudio.models import Conformer

        super().__init__()
        self.subsample = nn.Sequential(
            nn.Conv2d(1, width, 3, 2), nn.ReLU(), nn.Conv2d(width, width, 3, 2), nn.ReLU()
        )
        self.project = nn.Linear(width * (((mels - 1) // 2 - 1) // 2), width)
        self.conformer = Conformer(
            input_dim=width, num_heads=4, ffn_dim=4 * width, num_layers=16, depthwise_conv_kernel_size=31
        )
        self.head = nn.Linear(width, vocabulary)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.subsample(mel.unsqueeze(1))  # (N, C, T', F')
        x = self.project(x.transpose(1, 2).flatten(2))  # (N, T', C·F') -> (N, T', C)
        # Conformer.forward's padding mask from the lengths: every frame is valid here, and its
        # lengths.max().item() stops torch.export; the blocks as it runs them, without a mask.
        x = x.transpose(0, 1)
        for layer in self.conformer.conformer_layers:
            x = layer(x, None)
        return self.head(x.transpose(0, 1)).log_softmax(-1)


def conformer_ctc(frames: int = 1000) -> Built:
    return _ConformerCTC(), (torch.randn(1, frames, 80),)


# ---- point clouds: PointNet ----


class _TNet(nn.Module):
    """PointNet's input / feature transform network (STN3d / STNkd in fxia22/pointnet.pytorch)."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k
        self.features = nn.Sequential(
            *_conv1d_bn_relu(k, 64), *_conv1d_bn_relu(64, 128), *_conv1d_bn_relu(128, 1024)
        )
        self.regress = nn.Sequential(
            nn.Linear(1024, 512),
            nn.BatchNorm1d(512),
            nn.ReLU(),
            nn.Linear(512, 256),
            nn.BatchNorm1d(256),
            nn.ReLU(),
            nn.Linear(256, k * k),
        )
        self.register_buffer("identity", torch.eye(k).flatten(), persistent=False)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        x = self.features(points).amax(dim=2)
        return (self.regress(x) + self.identity).view(-1, self.k, self.k)


def _conv1d_bn_relu(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv1d(cin, cout, 1), nn.BatchNorm1d(cout), nn.ReLU()]


class _PointNetClassifier(nn.Module):
    """PointNetCls(feature_transform=True) of fxia22/pointnet.pytorch, the PyTorch port of
    charlesq34/pointnet's classification network."""

    def __init__(self, classes: int = 40) -> None:
        super().__init__()
        self.input_transform, self.feature_transform = _TNet(3), _TNet(64)
        self.conv1 = nn.Sequential(*_conv1d_bn_relu(3, 64))
        self.conv2 = nn.Sequential(*_conv1d_bn_relu(64, 128))
        self.conv3 = nn.Sequential(nn.Conv1d(128, 1024, 1), nn.BatchNorm1d(1024))
        self.classify = nn.Sequential(
            nn.Linear(1024, 512),
            nn.BatchNorm1d(512),
            nn.ReLU(),
            nn.Linear(512, 256),
            nn.Dropout(0.3),
            nn.BatchNorm1d(256),
            nn.ReLU(),
            nn.Linear(256, classes),
        )

    def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.bmm(self.input_transform(points), points)  # (N, 3, 3)·(N, 3, P): aligned points
        x = self.conv1(x)
        transform = self.feature_transform(x)
        x = torch.bmm(transform, x)
        x = self.conv3(self.conv2(x)).amax(dim=2)
        return self.classify(x).log_softmax(-1), transform  # the transform feeds the regulariser


def pointnet(points: int = 1024) -> Built:
    return _PointNetClassifier(), (torch.randn(1, 3, points),)


# ---- recommendation: NeuMF, DLRM ----


class _NeuMF(nn.Module):
    """mlcommons/training recommendation/pytorch/neumf.py (NCF, He et al. 2017): GMF and MLP
    towers with separate embeddings, concatenated into one logit."""

    def __init__(self, users: int, items: int, factors: int, layers: tuple[int, ...]) -> None:
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_user, self.mlp_item = (
            nn.Embedding(users, layers[0] // 2),
            nn.Embedding(items, layers[0] // 2),
        )
        mlp: list[nn.Module] = []
        for cin, cout in itertools.pairwise(layers):
            mlp += [nn.Linear(cin, cout), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.final = nn.Linear(layers[-1] + factors, 1)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        mf = self.mf_user(users) * self.mf_item(items)
        mlp = self.mlp(torch.cat([self.mlp_user(users), self.mlp_item(items)], dim=1))
        return self.final(torch.cat([mf, mlp], dim=1)).sigmoid()


ML20M_USERS, ML20M_ITEMS = 138_493, 26_744


def neumf() -> Built:
    module = _NeuMF(ML20M_USERS, ML20M_ITEMS, factors=64, layers=(256, 256, 128, 64))
    return module, (torch.randint(0, ML20M_USERS, (1,)), torch.randint(0, ML20M_ITEMS, (1,)))


# Rows per categorical feature of Criteo Kaggle Display Advertising after the DLRM preprocessing
# (dlrm_data_pytorch.py; the same counts as torchrec's DLRM Kaggle example).
CRITEO_KAGGLE_ROWS = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip


class _DLRM(nn.Module):
    """facebookresearch/dlrm dlrm_s_pytorch.py DLRM_Net with the Criteo Kaggle configuration
    (--arch-sparse-feature-size=16 --arch-mlp-bot=13-512-256-64-16 --arch-mlp-top=512-256-1,
    dot interaction without self-pairs). One index per table and sample (Criteo's categorical
    features are single-valued), so an embedding bag is a row look-up."""

    def __init__(self, rows: tuple[int, ...], dim: int, bottom: tuple[int, ...], top: tuple[int, ...]):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(count, dim) for count in rows)
        self.bottom = _mlp(bottom, last=nn.ReLU())
        vectors = len(rows) + 1
        self.top = _mlp((dim + vectors * (vectors - 1) // 2, *top), last=nn.Sigmoid())
        pairs = torch.tril_indices(vectors, vectors, offset=-1)
        self.register_buffer("pairs", pairs[0] * vectors + pairs[1], persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        # split, not sparse[:, i]: a Gather on a graph input would make it a weight to features.py
        columns = sparse.split(1, dim=1)
        embedded = [table(column.squeeze(1)) for table, column in zip(self.tables, columns, strict=True)]
        features = torch.stack([x, *embedded], dim=1)  # (N, 27, d)
        interactions = torch.bmm(features, features.transpose(1, 2)).flatten(1)[:, self.pairs]
        return self.top(torch.cat([x, interactions], dim=1))


def _mlp(sizes: tuple[int, ...], last: nn.Module) -> nn.Sequential:
    layers: list[nn.Module] = []
    for index, (cin, cout) in enumerate(itertools.pairwise(sizes)):
        layers += [nn.Linear(cin, cout), last if index == len(sizes) - 2 else nn.ReLU()]
    return nn.Sequential(*layers)


def dlrm_kaggle() -> Built:
    module = _DLRM(CRITEO_KAGGLE_ROWS, 16, (13, 512, 256, 64, 16), (512, 256, 1))
    sparse = torch.stack([torch.randint(0, rows, (1,)) for rows in CRITEO_KAGGLE_ROWS], dim=1)
    return module, (torch.randn(1, 13), sparse)


# ---- GANs ----


class _DCGANStep(nn.Module):
    """pytorch/examples dcgan/main.py (nz 100, ngf = ndf = 64, 64×64 RGB): one training step runs
    the generator once and the discriminator three times (real, detached fake, fake for G's loss)."""

    def __init__(self, noise: int = 100, width: int = 64, channels: int = 3) -> None:
        super().__init__()
        g, d = width, width
        self.generator = nn.Sequential(
            nn.ConvTranspose2d(noise, g * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(g * 8), nn.ReLU(True),
            nn.ConvTranspose2d(g * 8, g * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(g * 4), nn.ReLU(True),
            nn.ConvTranspose2d(g * 4, g * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(g * 2), nn.ReLU(True),
            nn.ConvTranspose2d(g * 2, g, 4, 2, 1, bias=False), nn.BatchNorm2d(g), nn.ReLU(True),
            nn.ConvTranspose2d(g, channels, 4, 2, 1, bias=False), nn.Tanh(),
        )  # fmt: skip
        self.discriminator = nn.Sequential(
            nn.Conv2d(channels, d, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
            nn.Conv2d(d, d * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(d * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(d * 2, d * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(d * 4), nn.LeakyReLU(0.2, True),
            nn.Conv2d(d * 4, d * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(d * 8), nn.LeakyReLU(0.2, True),
            nn.Conv2d(d * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
        )  # fmt: skip

    def forward(self, noise: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, ...]:
        fake = self.generator(noise)
        return self.discriminator(real), self.discriminator(fake.detach()), self.discriminator(fake)


def dcgan() -> Built:
    return _DCGANStep(), (torch.randn(1, 100, 1, 1), _image(64))


# junyanz/pytorch-CycleGAN-and-pix2pix models/networks.py


def _instance_norm(channels: int) -> nn.Module:
    return nn.InstanceNorm2d(channels, affine=False, track_running_stats=False)  # norm='instance'


class _ResnetBlock(nn.Module):
    def __init__(self, dim: int, norm: Callable[[int], nn.Module]) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm(dim), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm(dim),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def resnet_generator(blocks: int = 9, width: int = 64, norm=_instance_norm) -> nn.Module:
    """networks.ResnetGenerator(3, 3, ngf=64, norm='instance', n_blocks=9) ('resnet_9blocks')."""
    layers: list[nn.Module] = [
        nn.ReflectionPad2d(3),
        nn.Conv2d(3, width, 7, bias=True),
        norm(width),
        nn.ReLU(True),
    ]
    for scale in (1, 2):
        channels = width * scale
        layers += [nn.Conv2d(channels, 2 * channels, 3, 2, 1, bias=True), norm(2 * channels), nn.ReLU(True)]
    layers += [_ResnetBlock(4 * width, norm) for _ in range(blocks)]
    for scale in (4, 2):
        channels = width * scale
        layers += [
            nn.ConvTranspose2d(channels, channels // 2, 3, 2, 1, output_padding=1, bias=True),
            norm(channels // 2),
            nn.ReLU(True),
        ]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(width, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def patch_discriminator(channels: int = 3, width: int = 64, norm=_instance_norm) -> nn.Module:
    """networks.NLayerDiscriminator(n_layers=3): the 70×70 PatchGAN ('basic')."""
    bias = norm is _instance_norm  # use_bias = norm_layer == InstanceNorm2d
    layers: list[nn.Module] = [nn.Conv2d(channels, width, 4, 2, 1), nn.LeakyReLU(0.2, True)]
    multiplier = 1
    for n in range(1, 4):
        previous, multiplier = multiplier, min(2**n, 8)
        stride = 2 if n < 3 else 1
        layers += [
            nn.Conv2d(width * previous, width * multiplier, 4, stride, 1, bias=bias),
            norm(width * multiplier),
            nn.LeakyReLU(0.2, True),
        ]
    layers += [nn.Conv2d(width * multiplier, 1, 4, 1, 1)]
    return nn.Sequential(*layers)


def cyclegan_generator() -> Built:
    return resnet_generator(), (_image(256),)


class _UnetBlock(nn.Module):
    """networks.UnetSkipConnectionBlock with norm='batch' (so convolutions have no bias)."""

    def __init__(
        self, outer: int, inner: int, sub: nn.Module | None = None, *, outermost=False, dropout=False
    ):
        super().__init__()
        cin = 3 if outermost else outer
        down = [nn.Conv2d(cin, inner, 4, 2, 1, bias=False)]
        if outermost:
            up = [nn.ReLU(True), nn.ConvTranspose2d(inner * 2, 3, 4, 2, 1), nn.Tanh()]
            layers = [*down, sub, *up]
        elif sub is None:  # innermost
            up = [nn.ReLU(True), nn.ConvTranspose2d(inner, outer, 4, 2, 1, bias=False), nn.BatchNorm2d(outer)]
            layers = [nn.LeakyReLU(0.2, True), *down, *up]
        else:
            up = [
                nn.ReLU(True),
                nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1, bias=False),
                nn.BatchNorm2d(outer),
            ]
            layers = [nn.LeakyReLU(0.2, True), *down, nn.BatchNorm2d(inner), sub, *up]
            if dropout:
                layers.append(nn.Dropout(0.5))
        self.outermost = outermost
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)


def unet_generator(width: int = 64, downs: int = 8) -> nn.Module:
    """networks.UnetGenerator(3, 3, num_downs=8, ngf=64, norm='batch', use_dropout=True): unet_256."""
    block = _UnetBlock(width * 8, width * 8)
    for _ in range(downs - 5):
        block = _UnetBlock(width * 8, width * 8, block, dropout=True)
    for scale in (4, 2, 1):
        block = _UnetBlock(width * scale, width * scale * 2, block)
    return _UnetBlock(3, width, block, outermost=True)


class _Pix2PixStep(nn.Module):
    """models/pix2pix_model.py optimize_parameters (--model pix2pix defaults: unet_256, batch norm,
    a basic PatchGAN on the concatenated pair): G(A) once, D on (A, fake) twice and on (A, B) once."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = unet_generator()
        self.discriminator = patch_discriminator(channels=6, norm=nn.BatchNorm2d)

    def forward(self, real_a: torch.Tensor, real_b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        fake_b = self.generator(real_a)
        fake_pair = torch.cat([real_a, fake_b], 1)
        return (
            self.discriminator(fake_pair.detach()),
            self.discriminator(torch.cat([real_a, real_b], 1)),
            self.discriminator(fake_pair),
        )


def pix2pix_step() -> Built:
    return _Pix2PixStep(), (_image(256), _image(256))


# ---- reinforcement learning ----

HALFCHEETAH_OBSERVATION, HALFCHEETAH_ACTIONS = 17, 6


class _PPOAgent(nn.Module):
    """vwxyzjn/cleanrl ppo_continuous_action.py Agent: separate 64-64 tanh actor and critic MLPs
    and a state-independent log standard deviation."""

    def __init__(self, observation: int, actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            nn.Linear(observation, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
        )
        self.actor_mean = nn.Sequential(
            nn.Linear(observation, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, actions)
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, actions))

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mean = self.actor_mean(observation)
        return mean, self.actor_logstd.expand_as(mean).exp(), self.critic(observation)


def ppo() -> Built:
    return _PPOAgent(HALFCHEETAH_OBSERVATION, HALFCHEETAH_ACTIONS), (torch.randn(1, HALFCHEETAH_OBSERVATION),)


def _frozen_copy(module: nn.Module) -> nn.Module:
    """A target network: a copy whose weights are buffers (updated by Polyak averaging, not trained)."""
    target = copy.deepcopy(module)
    for child in target.modules():
        for name, parameter in list(child._parameters.items()):
            del child._parameters[name]
            child.register_buffer(name, parameter.detach().clone())
    return target


class _TD3Actor(nn.Module):
    def __init__(self, state: int, action: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(state, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.ReLU(),
            nn.Linear(256, action),
            nn.Tanh(),
        )

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state)  # × max_action = 1 for HalfCheetah


class _TD3Critic(nn.Module):
    def __init__(self, state: int, action: int) -> None:
        super().__init__()
        self.q1 = nn.Sequential(
            nn.Linear(state + action, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )
        self.q2 = nn.Sequential(
            nn.Linear(state + action, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pair = torch.cat([state, action], 1)
        return self.q1(pair), self.q2(pair)


class _TD3Step(nn.Module):
    """sfujim/TD3 TD3.py train(): the target actor and both target critics on the next state, both
    critics on the replayed pair, and the delayed actor update (policy_freq 2: actor + Q1)."""

    def __init__(self, state: int, action: int) -> None:
        super().__init__()
        self.actor, self.critic = _TD3Actor(state, action), _TD3Critic(state, action)
        self.actor_target, self.critic_target = _frozen_copy(self.actor), _frozen_copy(self.critic)

    def forward(
        self, state: torch.Tensor, action: torch.Tensor, next_state: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        noise = (torch.randn_like(action) * 0.2).clamp(-0.5, 0.5)
        next_action = (self.actor_target(next_state) + noise).clamp(-1.0, 1.0)
        target_q = torch.minimum(*self.critic_target(next_state, next_action))
        current_q1, current_q2 = self.critic(state, action)
        actor_q = self.critic.q1(torch.cat([state, self.actor(state)], 1))
        return target_q, current_q1, current_q2, actor_q


def td3() -> Built:
    state, action = HALFCHEETAH_OBSERVATION, HALFCHEETAH_ACTIONS
    return _TD3Step(state, action), (torch.randn(1, state), torch.randn(1, action), torch.randn(1, state))


# ---- the older workloads' models (Gavel, Muri, alnair), after the reference code each entry cites ----


class _ReshapeableAdaptivePool(nn.Module):
    """VGG's AdaptiveAvgPool2d((7, 7)) as a global average expanded to 7×7: torchvision's output shape at
    every input size (its values too where the last feature map is 1×1, CIFAR's case), so the shipped
    graph can be re-shaped (spec.model.inputShape); the exporter bakes a fixed-size pool otherwise."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features.mean((2, 3), keepdim=True).expand(-1, -1, 7, 7)


def vgg(name: str) -> Built:
    module, inputs = torchvision_classifier(name)
    module.avgpool = _ReshapeableAdaptivePool()
    return module, inputs


def cifar_resnet18() -> Built:
    """kuangliu/pytorch-cifar ResNet18: torchvision's BasicBlock ResNet-18 with a 3×3 stride-1 stem,
    no max-pool and 10 classes (its final 4×4 average pool is the global one at 32×32)."""
    module = torchvision.models.resnet18(weights=None, num_classes=10)
    module.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
    module.maxpool = nn.Identity()
    return module, (_image(32),)


def _nature_conv_body(frames: int) -> nn.Sequential:
    """DeepRL NatureConvBody: the DQN paper's 3 convolutions and a 512-unit layer (84×84 frames)."""
    return nn.Sequential(
        nn.Conv2d(frames, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 512),
        nn.ReLU(),
    )


class _ActorCritic(nn.Module):
    """DeepRL CategoricalActorCriticNet(NatureConvBody): policy logits and value on one observation."""

    def __init__(self, frames: int, actions: int) -> None:
        super().__init__()
        self.body = _nature_conv_body(frames)
        self.policy, self.value = nn.Linear(512, actions), nn.Linear(512, 1)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(observation)
        return self.policy(features), self.value(features)


def a2c(frames: int = 4, actions: int = 4) -> Built:
    return _ActorCritic(frames, actions), (torch.randn(1, frames, 84, 84),)


class _QLearningStep(nn.Module):
    """A DQN update's forward work: the Q-network on the state and its target copy (frozen: its weights
    are not parameters) on the next state."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.online, self.target = network, _frozen_copy(network)

    def forward(self, state: torch.Tensor, next_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.online(state), self.target(next_state)


def dqn(frames: int = 4, actions: int = 4) -> Built:
    """DeepRL VanillaNet(NatureConvBody) as DQNAgent trains it."""
    network = nn.Sequential(_nature_conv_body(frames), nn.Linear(512, actions))
    return _QLearningStep(network), (torch.randn(1, frames, 84, 84), torch.randn(1, frames, 84, 84))


def dqn_cartpole(hidden: tuple[int, ...] = (100, 50), actions: int = 2) -> Built:
    """TF-Agents QNetwork(fc_layer_params=(100, 50)) on CartPole's 4 observation values."""
    sizes = (4, *hidden)
    layers: list[nn.Module] = []
    for cin, cout in itertools.pairwise(sizes):
        layers += [nn.Linear(cin, cout), nn.ReLU()]
    network = nn.Sequential(*layers, nn.Linear(sizes[-1], actions))
    return _QLearningStep(network), (torch.randn(1, 4), torch.randn(1, 4))


def recoder_autoencoder(items: int = 20108, hidden: int = 200) -> Built:
    """recoder DynamicAutoencoder(hidden_layers=[200], activation='tanh') over the whole item vector."""
    module = nn.Sequential(nn.Linear(items, hidden), nn.Tanh(), nn.Linear(hidden, items))
    return module, (torch.randn(1, items),)


class _BertClassifier(nn.Module):
    """TensorFlow's BERT text-classification tutorial: the encoder's tanh-pooled [CLS] output and a
    1-unit dense head."""

    def __init__(self, config) -> None:
        super().__init__()
        from transformers import BertModel

        self.encoder = BertModel(config, add_pooling_layer=True)
        self.head = nn.Linear(config.hidden_size, 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(tokens, return_dict=True).pooler_output)


def small_bert(*, layers: int, width: int, heads: int, sequence: int = 128) -> Built:
    """TF-Hub small_bert/bert_en_uncased_L-{layers}_H-{width}_A-{heads} (uncased vocabulary 30,522,
    512 positions, feed-forward 4× wide) as Hugging Face's BertModel."""
    from transformers import BertConfig

    config = _eager(
        BertConfig(
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * width,
        )
    )
    return _BertClassifier(config), _tokens(sequence, config.vocab_size)


class _BatchFirst(nn.Module):
    """A time-major module ([S, N] tokens, as pytorch/examples feeds it) with the batch first, so that
    the graph's first dimension is the batch like every other entry's; outputs are [N, S, vocabulary]."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.inner(tokens.t()).transpose(0, 1)


class _WordLSTM(nn.Module):
    """pytorch/examples word_language_model RNNModel('LSTM', untied) as Gavel ships it: embedding, LSTM,
    decoder logits (its main.py applies CrossEntropyLoss); the hidden state starts at zero: the graph is
    one bptt chunk."""

    def __init__(self, vocabulary: int, embedding: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocabulary, embedding)
        self.rnn = nn.LSTM(embedding, hidden, layers)
        self.decoder = nn.Linear(hidden, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.rnn(self.encoder(tokens))
        return self.decoder(output)


def word_lstm_lm(vocabulary: int = 33278, width: int = 200, layers: int = 2, bptt: int = 35) -> Built:
    return _BatchFirst(_WordLSTM(vocabulary, width, width, layers)), _tokens(bptt, vocabulary)


def _sinusoids(positions: int, width: int) -> torch.Tensor:
    """The frozen sinusoid position table both reference repositories build."""
    position = torch.arange(positions, dtype=torch.float32)[:, None]
    angles = position / torch.pow(10000.0, 2 * (torch.arange(width) // 2) / width)
    return torch.where(torch.arange(width) % 2 == 0, torch.sin(angles), torch.cos(angles))


class _WordTransformer(nn.Module):
    """pytorch/examples word_language_model TransformerModel (the version built on
    nn.TransformerEncoder): scaled embedding, sinusoid positions, causal post-norm encoder layers with
    ReLU feed-forward, decoder, log-softmax."""

    def __init__(self, vocabulary: int, width: int, heads: int, feedforward: int, layers: int) -> None:
        super().__init__()
        self.width = width
        self.encoder = nn.Embedding(vocabulary, width)
        self.register_buffer("positions", _sinusoids(5000, width)[:, None, :])
        layer = nn.TransformerEncoderLayer(width, heads, feedforward)
        self.transformer_encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(width, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[0]
        mask = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        x = self.encoder(tokens) * self.width**0.5 + self.positions[:length]
        encoded = self.transformer_encoder(x, mask, is_causal=True)  # the hint torch.export needs
        return torch.log_softmax(self.decoder(encoded), dim=-1)


def word_transformer_lm(vocabulary: int = 33278, bptt: int = 35) -> Built:
    module = _WordTransformer(vocabulary, width=200, heads=2, feedforward=200, layers=2)
    return _BatchFirst(module), _tokens(bptt, vocabulary)


class _MultiHeadAttention(nn.Module):
    """attention-is-all-you-need-pytorch (the version Gavel ships) MultiHeadAttention: biased Q, K, V
    projections, scaled dot product with a mask, output projection, residual and post-norm."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads, self.depth = heads, width // heads
        self.w_qs, self.w_ks, self.w_vs = (nn.Linear(width, width) for _ in range(3))
        self.fc = nn.Linear(width, width)
        self.layer_norm = nn.LayerNorm(width)

    def forward(self, q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, _ = q.shape

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, x.shape[1], self.heads, self.depth).transpose(1, 2)

        query, key, value = split(self.w_qs(q)), split(self.w_ks(kv)), split(self.w_vs(kv))
        scores = (query @ key.transpose(2, 3)) / self.depth**0.5
        attended = torch.softmax(scores.masked_fill(mask[:, None], float("-inf")), dim=-1) @ value
        output = self.fc(attended.transpose(1, 2).reshape(batch, length, -1))
        return self.layer_norm(output + q)


class _ConvFeedForward(nn.Module):
    """PositionwiseFeedForward: two Conv1d(kernel 1) over the features, residual, post-norm."""

    def __init__(self, width: int, inner: int) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Conv1d(width, inner, 1), nn.Conv1d(inner, width, 1)
        self.layer_norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.w_2(torch.relu(self.w_1(x.transpose(1, 2)))).transpose(1, 2)
        return self.layer_norm(y + x)


class _TranslationTransformer(nn.Module):
    """attention-is-all-you-need-pytorch Transformer (6+6 post-norm layers, Conv1d feed-forward,
    frozen sinusoid positions looked up by position index, key padding and subsequent masks, the target
    projection tied to the target embedding (-proj_share_weight) and scaled by d_model^-0.5)."""

    def __init__(self, sources: int, targets: int, width: int, inner: int, heads: int, layers: int) -> None:
        super().__init__()
        self.width = width
        self.src_word_emb = nn.Embedding(sources, width, padding_idx=0)
        self.tgt_word_emb = nn.Embedding(targets, width, padding_idx=0)
        self.register_buffer("positions", _sinusoids(53, width))  # max_len 52 + the padding position
        self.encoder_attention = nn.ModuleList(_MultiHeadAttention(width, heads) for _ in range(layers))
        self.encoder_ffn = nn.ModuleList(_ConvFeedForward(width, inner) for _ in range(layers))
        self.decoder_self = nn.ModuleList(_MultiHeadAttention(width, heads) for _ in range(layers))
        self.decoder_cross = nn.ModuleList(_MultiHeadAttention(width, heads) for _ in range(layers))
        self.decoder_ffn = nn.ModuleList(_ConvFeedForward(width, inner) for _ in range(layers))

    def forward(
        self, src_seq: torch.Tensor, src_pos: torch.Tensor, tgt_seq: torch.Tensor, tgt_pos: torch.Tensor
    ) -> torch.Tensor:
        source_pad = src_seq.eq(0)[:, None, :]
        target_pad = tgt_seq.eq(0)[:, None, :]
        length = tgt_seq.shape[1]
        subsequent = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)[None]
        encoded = self.src_word_emb(src_seq) + self.positions[src_pos]
        for attention, ffn in zip(self.encoder_attention, self.encoder_ffn, strict=True):
            encoded = ffn(attention(encoded, encoded, source_pad))
        decoded = self.tgt_word_emb(tgt_seq) + self.positions[tgt_pos]
        layers = zip(self.decoder_self, self.decoder_cross, self.decoder_ffn, strict=True)
        for self_attention, cross_attention, ffn in layers:
            decoded = self_attention(decoded, decoded, target_pad | subsequent)
            decoded = ffn(cross_attention(decoded, encoded, source_pad))
        return (decoded @ self.tgt_word_emb.weight.t()) * self.width**-0.5


def translation_transformer(vocabulary: int = 3000, length: int = 32) -> Built:
    module = _TranslationTransformer(vocabulary, vocabulary, width=512, inner=2048, heads=8, layers=6)
    tokens = torch.randint(1, vocabulary, (1, length))
    positions = torch.arange(1, length + 1)[None]
    return module, (tokens, positions, tokens.clone(), positions.clone())


class _A3CLSTM(nn.Module):
    """rl_a3c_pytorch A3Clstm: four convolution / max-pool / leaky-ReLU stages, LSTMCell(1024, 512),
    critic and actor heads; one step on one frame with the carried LSTM state. The LSTMCell is written
    as one step of nn.LSTM (the same arithmetic and parameters): on the GPU torch runs the cell as two
    GEMMs and one fused pointwise kernel, which an ONNX LSTM step describes, where the exporter would
    write LSTMCell's gates as ten elementwise nodes."""

    def __init__(self, actions: int) -> None:
        super().__init__()
        plan = ((1, 32, 5, 2), (32, 32, 5, 1), (32, 64, 4, 1), (64, 64, 3, 1))
        stages: list[nn.Module] = []
        for cin, cout, kernel, padding in plan:
            stages += [nn.Conv2d(cin, cout, kernel, padding=padding), nn.MaxPool2d(2, 2), nn.LeakyReLU(0.1)]
        self.features = nn.Sequential(*stages, nn.Flatten())
        self.lstm = nn.LSTM(1024, 512)
        self.critic_linear, self.actor_linear = nn.Linear(512, 1), nn.Linear(512, actions)

    def forward(
        self, frame: torch.Tensor, hx: torch.Tensor, cx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        _, (hx, cx) = self.lstm(self.features(frame)[None], (hx[None], cx[None]))
        hx, cx = hx[0], cx[0]
        return self.critic_linear(hx), self.actor_linear(hx), hx, cx


def a3c(actions: int = 6) -> Built:
    return _A3CLSTM(actions), (_image(80, channels=1), torch.zeros(1, 512), torch.zeros(1, 512))


def _pytorch_gan_generator(blocks: int = 9) -> nn.Module:
    """PyTorch-GAN (eriklindernoren) cyclegan models.py GeneratorResNet: reflection padding, instance
    norm, two stride-2 convolutions down, residual blocks, nearest upsampling + convolution up."""

    def norm_relu(channels: int) -> list[nn.Module]:
        return [nn.InstanceNorm2d(channels), nn.ReLU()]

    layers: list[nn.Module] = [nn.ReflectionPad2d(3), nn.Conv2d(3, 64, 7), *norm_relu(64)]
    for cin, cout in ((64, 128), (128, 256)):
        layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), *norm_relu(cout)]
    layers += [_PyTorchGANResidual(256) for _ in range(blocks)]
    for cin, cout in ((256, 128), (128, 64)):
        layers += [nn.Upsample(scale_factor=2), nn.Conv2d(cin, cout, 3, padding=1), *norm_relu(cout)]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(64, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


class _PyTorchGANResidual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1),
            nn.Conv2d(channels, channels, 3),
            nn.InstanceNorm2d(channels),
            nn.ReLU(),
            nn.ReflectionPad2d(1),
            nn.Conv2d(channels, channels, 3),
            nn.InstanceNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def _pytorch_gan_discriminator() -> nn.Module:
    """PyTorch-GAN Discriminator: four stride-2 4×4 convolutions (no norm on the first), then one map."""
    layers: list[nn.Module] = []
    for cin, cout in ((3, 64), (64, 128), (128, 256), (256, 512)):
        layers.append(nn.Conv2d(cin, cout, 4, stride=2, padding=1))
        layers += [nn.InstanceNorm2d(cout)] if cin != 3 else []
        layers.append(nn.LeakyReLU(0.2))
    return nn.Sequential(*layers, nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(512, 1, 4, padding=1))


class _PyTorchGANCycleStep(nn.Module):
    """PyTorch-GAN cyclegan.py's training step (which Gavel runs): per image pair, 6 generator passes
    (identity ×2, translation ×2, cycle ×2) and 6 discriminator passes: each D on the other
    generator's fake for the GAN loss, and on a real image and a fake from its replay buffer
    (push_and_pop returns a new batch: a graph input here, so that no pass is merged with another)."""

    def __init__(self) -> None:
        super().__init__()
        self.G_AB, self.G_BA = _pytorch_gan_generator(), _pytorch_gan_generator()
        self.D_A, self.D_B = _pytorch_gan_discriminator(), _pytorch_gan_discriminator()

    def forward(
        self, real_a: torch.Tensor, real_b: torch.Tensor, replayed_a: torch.Tensor, replayed_b: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        identity = (self.G_BA(real_a), self.G_AB(real_b))
        fake_b, fake_a = self.G_AB(real_a), self.G_BA(real_b)
        cycle = (self.G_BA(fake_b), self.G_AB(fake_a))
        gan = (self.D_B(fake_b), self.D_A(fake_a))
        judged = (self.D_A(real_a), self.D_A(replayed_a), self.D_B(real_b), self.D_B(replayed_b))
        return (*identity, *cycle, *gan, *judged)


def pytorch_gan_cyclegan() -> Built:
    return _PyTorchGANCycleStep(), tuple(_image(256) for _ in range(4))


class _TFDCGANStep(nn.Module):
    """TensorFlow's DCGAN tutorial (MNIST) as torch modules: a dense + batch-norm generator with three
    5×5 transposed convolutions, a two-convolution discriminator; one training step per sample runs
    the generator once and the discriminator on the real and on the generated image."""

    def __init__(self, noise: int = 100) -> None:
        super().__init__()

        def up(cin: int, cout: int, stride: int) -> list[nn.Module]:
            return [
                nn.ConvTranspose2d(cin, cout, 5, stride, padding=2, output_padding=stride - 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.LeakyReLU(0.3),
            ]

        self.generator = nn.Sequential(
            nn.Linear(noise, 7 * 7 * 256, bias=False),
            nn.BatchNorm1d(7 * 7 * 256),
            nn.LeakyReLU(0.3),
            nn.Unflatten(1, (256, 7, 7)),
            *up(256, 128, 1),
            *up(128, 64, 2),
            nn.ConvTranspose2d(64, 1, 5, 2, padding=2, output_padding=1, bias=False),
            nn.Tanh(),
        )
        self.discriminator = nn.Sequential(
            nn.Conv2d(1, 64, 5, stride=2, padding=2),
            nn.LeakyReLU(0.3),
            nn.Dropout(0.3),
            nn.Conv2d(64, 128, 5, stride=2, padding=2),
            nn.LeakyReLU(0.3),
            nn.Dropout(0.3),
            nn.Flatten(),
            nn.Linear(128 * 7 * 7, 1),
        )

    def forward(self, noise: torch.Tensor, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.discriminator(image), self.discriminator(self.generator(noise))


def tf_dcgan_mnist() -> Built:
    return _TFDCGANStep(), (torch.randn(1, 100), _image(28, channels=1))


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


class _DPNBlock(nn.Module):
    """kuangliu/pytorch-cifar DPN Bottleneck: a grouped bottleneck whose output is split into a
    residual part (added) and a densely connected part (concatenated)."""

    def __init__(self, last: int, inner: int, out: int, dense: int, stride: int, first: bool) -> None:
        super().__init__()
        self.out = out
        self.body = nn.Sequential(
            *_conv_bn(last, inner, 1),
            nn.ReLU(),
            *_conv_bn(inner, inner, 3, stride, groups=32),
            nn.ReLU(),
            *_conv_bn(inner, out + dense, 1),
        )
        self.shortcut = nn.Sequential(*_conv_bn(last, out + dense, 1, stride)) if first else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, x = self.body(x), self.shortcut(x)
        d = self.out
        return torch.relu(torch.cat([x[:, :d] + y[:, :d], x[:, d:], y[:, d:]], 1))


def dpn92_cifar() -> Built:
    """kuangliu/pytorch-cifar DPN92: in_planes (96, 192, 384, 768), out_planes (256, 512, 1024, 2048),
    blocks (3, 4, 20, 3), dense depth (16, 32, 24, 128), 10 classes."""
    layers: list[nn.Module] = [*_conv_bn(3, 64, 3), nn.ReLU()]
    last = 64
    stages = ((96, 256, 3, 16, 1), (192, 512, 4, 32, 2), (384, 1024, 20, 24, 2), (768, 2048, 3, 128, 2))
    for inner, out, blocks, dense, stride in stages:
        for index in range(blocks):
            layers.append(_DPNBlock(last, inner, out, dense, stride if index == 0 else 1, index == 0))
            last = out + (index + 2) * dense
    module = nn.Sequential(*layers, nn.AvgPool2d(4), nn.Flatten(), nn.Linear(last, 10))
    return module, (_image(32),)


class _PyramidBlock(nn.Module):
    """dyhan0920/PyramidNet-PyTorch BasicBlock: BN, conv, BN, ReLU, conv, BN; the shortcut (2×2 average
    pool when strided) zero-padded to the wider output."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.extra = cout - cin
        self.body = nn.Sequential(
            nn.BatchNorm2d(cin),
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.downsample = nn.AvgPool2d(2, 2, ceil_mode=True) if stride != 1 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = nn.functional.pad(self.downsample(x), (0, 0, 0, 0, 0, self.extra))
        return self.body(x) + shortcut


def pyramidnet_cifar(depth: int = 110, alpha: int = 48) -> Built:
    """PyramidNet(dataset='cifar10', depth, alpha, bottleneck=False): widths grow by alpha / (3n)."""
    blocks = (depth - 2) // 6
    add_rate = alpha / (3 * blocks)
    layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)]
    width, channels = 16.0, 16
    for stage in range(3):
        for index in range(blocks):
            width += add_rate
            layers.append(_PyramidBlock(channels, round(width), 2 if stage > 0 and index == 0 else 1))
            channels = round(width)
    layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AvgPool2d(8), nn.Flatten(), nn.Linear(channels, 10)]
    return nn.Sequential(*layers), (_image(32),)


def keras_mobilenet_v1(classes: int, size: int = 224) -> Built:
    """Keras MobileNet (α = 1.0): a 3×3 stride-2 stem, 13 depthwise-separable blocks (batch norm, ReLU6),
    global average pool, a dense head (the TF-Hub feature vector + Dense). Keras' asymmetric 'correct'
    padding of the strided convolutions is written as symmetric padding with the same output sizes."""
    layers: list[nn.Module] = [*_conv_bn(3, 32, 3, 2), nn.ReLU6()]
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5, (1024, 2), (1024, 1)]
    channels = 32
    for out, stride in plan:
        layers += [*_conv_bn(channels, channels, 3, stride, groups=channels), nn.ReLU6()]
        layers += [*_conv_bn(channels, out, 1), nn.ReLU6()]
        channels = out
    module = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))
    return module, (_image(size),)


class _UNetMobileNetV2(nn.Module):
    """TensorFlow's segmentation tutorial: a MobileNetV2 encoder (torchvision's, the same layers as
    Keras') tapped at block_{1,3,6,13}_expand_relu and block_16_project, pix2pix upsample blocks
    (transposed 3×3/2 convolution, batch norm, ReLU) joined with the taps, and a transposed
    convolution to `classes` maps."""

    TAPS = (2, 4, 7, 14)  # torchvision features[i] = Keras block i-1; the tap is its expansion's output

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.encoder = torchvision.models.mobilenet_v2(weights=None).features[:18]
        ups, channels = [], 320
        for filters, skip in zip((512, 256, 128, 64), (576, 192, 144, 96), strict=True):
            ups.append(
                nn.Sequential(
                    nn.ConvTranspose2d(channels, filters, 3, 2, padding=1, output_padding=1, bias=False),
                    nn.BatchNorm2d(filters),
                    nn.ReLU(),
                )
            )
            channels = filters + skip
        self.ups = nn.ModuleList(ups)
        self.last = nn.ConvTranspose2d(channels, classes, 3, 2, padding=1, output_padding=1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        skips, x = [], image
        for index, block in enumerate(self.encoder):
            if index in self.TAPS:
                expanded = block.conv[0](x)
                skips.append(expanded)
                y = block.conv[1:](expanded)
                x = x + y if block.use_res_connect else y
            else:
                x = block(x)
        for up, skip in zip(self.ups, reversed(skips), strict=True):
            x = torch.cat([up(x), skip], 1)
        return self.last(x)


def unet_mobilenet_v2(size: int = 128, classes: int = 3) -> Built:
    return _UNetMobileNetV2(classes), (_image(size),)


class _Separable(nn.Sequential):
    """Keras NASNet's _separable_conv_block: twice (ReLU, depthwise k×k, pointwise 1×1, batch norm)."""

    def __init__(self, cin: int, filters: int, kernel: int, stride: int = 1) -> None:
        layers: list[nn.Module] = []
        for step_stride, channels in ((stride, cin), (1, filters)):
            depthwise = nn.Conv2d(
                channels, channels, kernel, step_stride, kernel // 2, groups=channels, bias=False
            )
            layers += [
                nn.ReLU(),
                depthwise,
                nn.Conv2d(channels, filters, 1, bias=False),
                nn.BatchNorm2d(filters),
            ]
        super().__init__(*layers)


def _relu_conv_bn(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))


class _FactorizedReduction(nn.Module):
    """Keras' _adjust_block for a previous tensor one resolution up: two stride-2 1×1 paths offset by
    one pixel, half the filters each."""

    def __init__(self, cin: int, filters: int) -> None:
        super().__init__()
        self.first = nn.Conv2d(cin, filters // 2, 1, bias=False)
        self.second = nn.Conv2d(cin, filters // 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(2 * (filters // 2))

    def forward(self, previous: torch.Tensor) -> torch.Tensor:
        relu = torch.relu(previous)
        shifted = nn.functional.pad(relu, (0, 1, 0, 1))[:, :, 1:, 1:]
        paths = [
            conv(nn.functional.avg_pool2d(x, 1, 2))
            for conv, x in ((self.first, relu), (self.second, shifted))
        ]
        return self.bn(torch.cat(paths, 1))


def _avg_pool(stride: int) -> nn.Module:
    return nn.AvgPool2d(3, stride, 1, count_include_pad=False)


class _NASNetCell(nn.Module):
    """A NASNet-A normal or reduction cell (Keras' _normal_a_cell / _reduction_a_cell) on this cell's
    input x and the adjusted previous input p."""

    def __init__(self, reduction: bool, cin: int, cp: int, filters: int) -> None:
        super().__init__()
        self.reduction = reduction
        self.h = _relu_conv_bn(cin, filters)
        if reduction:
            self.separables = nn.ModuleList(
                [
                    _Separable(filters, filters, 5, 2),
                    _Separable(cp, filters, 7, 2),
                    _Separable(cp, filters, 7, 2),
                    _Separable(cp, filters, 5, 2),
                    _Separable(filters, filters, 3),
                ]
            )
        else:
            self.separables = nn.ModuleList(
                [
                    _Separable(filters, filters, 5),
                    _Separable(cp, filters, 3),
                    _Separable(cp, filters, 5),
                    _Separable(cp, filters, 3),
                    _Separable(filters, filters, 3),
                ]
            )
        self.max_pool, self.strided_avg, self.avg = nn.MaxPool2d(3, 2, 1), _avg_pool(2), _avg_pool(1)

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        h = self.h(x)
        s = self.separables
        if self.reduction:
            x1 = s[0](h) + s[1](p)
            x2 = self.max_pool(h) + s[2](p)
            x3 = self.strided_avg(h) + s[3](p)
            x4 = self.avg(x1) + x2
            x5 = s[4](x1) + self.max_pool(h)
            return torch.cat([x2, x3, x4, x5], 1)
        blocks = [
            s[0](h) + s[1](p),
            s[2](p) + s[3](p),
            self.avg(h) + p,
            self.avg(p) + self.avg(p),
            s[4](h) + h,
        ]
        return torch.cat([p, *blocks], 1)


class _NASNetMobile(nn.Module):
    """Keras NASNetMobile (NASNet-A 4@1056): a stride-2 stem, two stem reduction cells, then three
    stacks of 4 normal cells separated by reduction cells; each cell also reads the previous cell's
    input. Keras' asymmetric 'correct' padding is written as symmetric padding with the same output
    sizes."""

    def __init__(self, classes: int, penultimate: int = 1056) -> None:
        super().__init__()
        filters = penultimate // 24
        plan = [(True, filters // 4), (True, filters // 2)]
        for stack in range(3):
            if stack:
                plan.append((True, filters * 2**stack))
            plan += [(False, filters * 2**stack)] * 4
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, bias=False), nn.BatchNorm2d(32))
        cells, adjusts = [], []
        x_channels, previous_channels, after_reduction = 32, None, False
        for reduction, width in plan:
            if previous_channels is None:
                adjust, p_channels = nn.Identity(), x_channels
            elif after_reduction:
                adjust, p_channels = _FactorizedReduction(previous_channels, width), 2 * (width // 2)
            elif previous_channels != width:
                adjust, p_channels = _relu_conv_bn(previous_channels, width), width
            else:
                adjust, p_channels = nn.Identity(), width
            adjusts.append(adjust)
            cells.append(_NASNetCell(reduction, x_channels, p_channels, width))
            previous_channels, x_channels = x_channels, (4 if reduction else 6) * width
            after_reduction = reduction
        self.cells, self.adjusts = nn.ModuleList(cells), nn.ModuleList(adjusts)
        self.head = nn.Sequential(
            nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(x_channels, classes)
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.stem(image)
        previous = None
        for cell, adjust in zip(self.cells, self.adjusts, strict=True):
            p = adjust(x if previous is None else previous)
            x, previous = cell(x, p), x
        return self.head(x)


def keras_nasnet_mobile(classes: int, size: int = 224) -> Built:
    return _NASNetMobile(classes), (_image(size),)


# ---- the registry ----

BUILDERS: dict[str, Callable[[], Built]] = {}
# Parameters the eval-mode forward does not use: wav2vec 2.0's SpecAugment mask embedding replaces
# masked frames in training only.
UNUSED: dict[str, tuple[str, ...]] = {"wav2vec2-base": ("inner.wav2vec2.masked_spec_embed",)}


def _register(name: str, builder: Callable[[], Built]) -> None:
    BUILDERS[name] = builder


# VGG without batch norm is registered below with its adaptive pool re-shapeable (`vgg`).
TORCHVISION_CLASSIFIERS = [
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnext50_32x4d",
    "resnext101_32x8d",
    "resnext101_64x4d",
    "wide_resnet50_2",
    "wide_resnet101_2",
    "vgg11_bn",
    "vgg13_bn",
    "vgg16_bn",
    "vgg19_bn",
    "densenet121",
    "densenet161",
    "densenet169",
    "densenet201",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "shufflenet_v2_x0_5",
    "shufflenet_v2_x1_0",
    "shufflenet_v2_x1_5",
    "shufflenet_v2_x2_0",
    "mnasnet0_5",
    "mnasnet0_75",
    "mnasnet1_0",
    "mnasnet1_3",
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
    "efficientnet_v2_s",
    "squeezenet1_0",
    "squeezenet1_1",
    "googlenet",
    "inception_v3",
    "alexnet",
    "regnet_y_400mf",
    "regnet_y_800mf",
    "regnet_y_1_6gf",
    "regnet_y_3_2gf",
    "regnet_y_128gf",
    "regnet_x_400mf",
    "regnet_x_800mf",
    "regnet_x_1_6gf",
    "regnet_x_3_2gf",
    "vit_b_16",
    "vit_b_32",
    "vit_l_16",
    "convnext_tiny",
    "convnext_small",
    "convnext_large",
    "swin_t",
    "swin_s",
    "swin_v2_t",
    "swin_v2_s",
    "maxvit_t",
]
for _name in TORCHVISION_CLASSIFIERS:
    _register(_name, lambda name=_name: torchvision_classifier(name))
for _name in (
    "fcn_resnet50",
    "deeplabv3_resnet50",
    "deeplabv3_mobilenet_v3_large",
    "lraspp_mobilenet_v3_large",
):
    _register(_name, lambda name=_name: torchvision_segmentation(name))
for _name in ("retinanet_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_fpn"):
    _register(_name, lambda name=_name: torchvision_detection(name))

_register("gpt2", lambda: gpt2(width=768, layers=12, heads=12))
_register("gpt2-medium", lambda: gpt2(width=1024, layers=24, heads=16))
_register("bert", lambda: bert_mlm(width=768, layers=12, heads=12, inner=3072))
_register("bert-large", lambda: bert_mlm(width=1024, layers=24, heads=16, inner=4096))
_register("distilbert", distilbert_mlm)
_register("llama-160m", lambda: llama(width=768, inner=3072, layers=12, heads=12, kv_heads=12, sequence=2048))
_register(
    "tinyllama-1.1b", lambda: llama(width=2048, inner=5632, layers=22, heads=32, kv_heads=4, sequence=2048)
)
_register("wav2vec2-base", wav2vec2_ctc)
_register("conformer-s", conformer_ctc)
_register("pointnet", pointnet)
_register("neumf", neumf)
_register("dlrm", dlrm_kaggle)
_register("dcgan-64", dcgan)
_register("cyclegan-generator", cyclegan_generator)
_register("pix2pix", pix2pix_step)
_register("ppo", ppo)
_register("td3", td3)
_register(
    "inception_v3-gtsrb", lambda: torchvision_classifier("inception_v3", classes=43, size=224, aux=False)
)
_register(
    "efficientnet_v2_s-gtsrb", lambda: torchvision_classifier("efficientnet_v2_s", classes=43, size=224)
)
for _name in ("vgg11", "vgg13", "vgg16", "vgg19"):
    _register(f"{_name}-reshapeable", lambda name=_name: vgg(name))
_register("resnet18-cifar", cifar_resnet18)
_register("transformer", translation_transformer)
_register("lstm-lm", word_lstm_lm)
_register("transformer-lm", word_transformer_lm)
_register("a3c", a3c)
_register("cyclegan", pytorch_gan_cyclegan)
_register("dcgan", tf_dcgan_mnist)
_register("dpn92", dpn92_cifar)
_register("pyramidnet110", pyramidnet_cifar)
_register("mobilenet_v1", lambda: keras_mobilenet_v1(43))
_register("mobilenet_v1-imagenet", lambda: keras_mobilenet_v1(1000))
_register("unet-mobilenet_v2", unet_mobilenet_v2)
_register("nasnet_mobile", lambda: keras_nasnet_mobile(43))
_register("nasnet_mobile-imagenet", lambda: keras_nasnet_mobile(1000))
_register("a2c", a2c)
_register("dqn", dqn)
_register("dqn-cartpole", dqn_cartpole)
_register("recommendation", recoder_autoencoder)
for _layers, _width, _heads in SMALL_BERTS:
    _register(
        small_bert_name(_layers, _width, _heads),
        lambda layers=_layers, width=_width, heads=_heads: small_bert(
            layers=layers, width=width, heads=heads
        ),
    )
