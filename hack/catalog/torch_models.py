"""Reference PyTorch modules for the catalog's exported entries (needs torch; `--from-torch` only).

Each builder returns (module, example inputs at batch size 1). torchvision and transformers models
come from those packages, built without weights (random initialisation; no download). Models with
no reference package are small modules written here after the paper's reference code, cited in the
entry's source in gen_catalog.py.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable

import torch
import torchvision
from torch import nn

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


def torchvision_published_params(name: str) -> int:
    """The parameter count torchvision's weight tables state (ships with torchvision, no download)."""
    return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"]


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


class _CycleGANStep(nn.Module):
    """models/cycle_gan_model.py optimize_parameters: G_A(A), G_B(fake_B), G_B(B), G_A(fake_A), the
    identity passes G_A(B) and G_B(A) (lambda_identity 0.5), D on both fakes for G's loss, and each
    D on a real and a (pooled) fake image: 6 generator and 6 discriminator passes."""

    def __init__(self) -> None:
        super().__init__()
        self.g_a, self.g_b = resnet_generator(), resnet_generator()
        self.d_a, self.d_b = patch_discriminator(), patch_discriminator()

    def forward(self, real_a: torch.Tensor, real_b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        fake_b, fake_a = self.g_a(real_a), self.g_b(real_b)
        rec_a, rec_b = self.g_b(fake_b), self.g_a(fake_a)
        idt_a, idt_b = self.g_a(real_b), self.g_b(real_a)
        g_losses = self.d_a(fake_b), self.d_b(fake_a)
        d_losses = self.d_a(real_b), self.d_a(fake_b.detach()), self.d_b(real_a), self.d_b(fake_a.detach())
        return rec_a, rec_b, idt_a, idt_b, *g_losses, *d_losses


def cyclegan_step() -> Built:
    return _CycleGANStep(), (_image(256), _image(256))


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


# ---- the registry ----

BUILDERS: dict[str, Callable[[], Built]] = {}
# Parameters the eval-mode forward does not use: wav2vec 2.0's SpecAugment mask embedding replaces
# masked frames in training only.
UNUSED: dict[str, tuple[str, ...]] = {"wav2vec2-base": ("inner.wav2vec2.masked_spec_embed",)}


def _register(name: str, builder: Callable[[], Built]) -> None:
    BUILDERS[name] = builder


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
    "vgg11",
    "vgg13",
    "vgg16",
    "vgg19",
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
_register("cyclegan-junyanz", cyclegan_step)
_register("cyclegan-generator", cyclegan_generator)
_register("pix2pix", pix2pix_step)
_register("ppo", ppo)
_register("td3", td3)
# Graphs for existing hand-built entries, exported only to compare (--compare-torch)
_register(
    "inception_v3-gtsrb", lambda: torchvision_classifier("inception_v3", classes=43, size=224, aux=False)
)
_register(
    "efficientnet_v2_s-gtsrb", lambda: torchvision_classifier("efficientnet_v2_s", classes=43, size=224)
)
