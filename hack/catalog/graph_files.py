"""Where the catalog's graphs live, and how they are stored.

Every entry's graph is shipped with the package (horus_operator/prediction/data/graphs/<entry>.onnx.gz,
read by prediction/reshape.py for spec.model.inputShape). Exported graphs are written there by
`--from-torch` and read back from there: the package data is their only copy.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parents[2]
GRAPHS_DIR = REPO / "horus_operator/prediction/data/graphs"
# The packages the exported graphs were made with (not shipped: it describes the generator's run).
VERSIONS_PATH = REPO / "hack/catalog/versions.json"


def path(name: str) -> Path:
    return GRAPHS_DIR / f"{name}.onnx.gz"


def load(name: str) -> onnx.ModelProto:
    """An entry's exported graph (gzip-compressed ONNX, weights as shapes without data)."""
    file = path(name)
    if not file.exists():
        raise SystemExit(f"{file} is missing: re-export it with python hack/gen_catalog.py --from-torch")
    with gzip.open(file, "rb") as handle:
        return onnx.load_model_from_string(handle.read())


def compressed(model: onnx.ModelProto) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:  # reproducible bytes
        handle.write(model.SerializeToString(deterministic=True))
    return buffer.getvalue()
