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
