"""Architecture families of the catalog models: held out together in cross-validation, so a family's
other sizes never leak into its test."""

import re

# Architecture stems whose models share another stem's family: the names cannot tell that ResNeXt and
# Wide ResNet are ResNets, or that MnasNet and EfficientNet are built of MobileNet's inverted residuals.
SHARED_FAMILIES: dict[str, str] = {
    "resnext": "resnet",
    "wide": "resnet",
    "mobilenet": "mobile",
    "mnasnet": "mobile",
    "efficientnet": "mobile",
}


def family(model: str) -> str:
    """A catalog model's architecture family: its name's first word without the size digits (resnet152
    -> resnet, regnet_y_400mf -> regnet, lstm-lm -> lstm), or the family SHARED_FAMILIES gives that stem;
    a name that is all digits before its first separator is a family of its own."""
    stem = re.split(r"[_-]", model, maxsplit=1)[0].rstrip("0123456789")
    return SHARED_FAMILIES.get(stem, stem or model)


# Architecture families: held out together, so a family's other sizes never leak into its test.
FAMILIES: dict[str, str] = {
    "resnet18": "resnet",
    "resnet34": "resnet",
    "resnet50": "resnet",
    "resnet101": "resnet",
    "resnet152": "resnet",
    "resnext50_32x4d": "resnet",
    "resnext101_32x8d": "resnet",
    "resnext101_64x4d": "resnet",
    "wide_resnet50_2": "resnet",
    "wide_resnet101_2": "resnet",
    **{
        name: "vgg"
        for name in ("vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn")
    },
    **{name: "densenet" for name in ("densenet121", "densenet161", "densenet169", "densenet201")},
    **{
        name: "regnet"
        for name in (
            "regnet_x_400mf",
            "regnet_x_800mf",
            "regnet_x_1_6gf",
            "regnet_x_3_2gf",
            "regnet_y_400mf",
            "regnet_y_800mf",
            "regnet_y_1_6gf",
            "regnet_y_3_2gf",
            "regnet_y_128gf",
        )
    },
    **{
        name: "mobile"
        for name in (
            "mobilenet_v2",
            "mobilenet_v3_large",
            "mobilenet_v3_small",
            "mnasnet0_75",
            "mnasnet1_0",
            "efficientnet_b0",
        )
    },
    **{name: "vit" for name in ("vit_b_16", "vit_b_32", "vit_l_16")},
    **{name: "swin" for name in ("swin_t", "swin_s")},
    **{name: "convnext" for name in ("convnext_tiny", "convnext_small", "convnext_large")},
    "inception_v3-imagenet": "inception",
    "transformer": "transformer",
    "lstm-lm": "lstm",
    "recommendation": "recommendation",
    "a3c": "a3c",
    "cyclegan": "cyclegan",
}
