"""Trained models on disk: XGBoost JSON files, the memory model and a metadata.json describing them.

A models directory holds `slowdown.json`, `utilization.json` (XGBoost boosters), `memory.json` (the
calibrated memory model) and `metadata.json` (per model: training-data file and SHA-256, feature
columns, training date, cross-validated metrics). A directory made by `horus train` may hold only some
of them; the rest come from the models shipped in this package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horus_operator.prediction.memory import MemoryModel
from horus_operator.prediction.trees import TreeEnsemble

if TYPE_CHECKING:  # training only: loading never imports xgboost
    import xgboost as xgb

SHIPPED_DIR = Path(__file__).with_name("models")
METADATA_FILE = "metadata.json"
BOOSTER_NAMES = ("slowdown", "utilization")
MEMORY_FILE = "memory.json"


@dataclass
class Artifacts:
    slowdown: TreeEnsemble
    utilization: TreeEnsemble
    memory: MemoryModel
    # model name -> its metadata entry, and "sources": model name -> directory it was loaded from
    metadata: dict[str, Any] = field(default_factory=dict)


def _pick(directory: Path, filename: str) -> Path:
    candidate = directory / filename
    return candidate if candidate.is_file() else SHIPPED_DIR / filename


def _read_metadata(directory: Path) -> dict[str, Any]:
    path = directory / METADATA_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def load(directory: str | Path | None = None) -> Artifacts:
    """Models from `directory` (default: the shipped ones), each missing file taken from the shipped set."""
    directory = Path(directory) if directory is not None else SHIPPED_DIR
    if not directory.is_dir():
        raise FileNotFoundError(f"models directory {directory} does not exist")
    boosters = {}
    metadata: dict[str, Any] = {"sources": {}}
    for name in (*BOOSTER_NAMES, "memory"):
        filename = MEMORY_FILE if name == "memory" else f"{name}.json"
        path = _pick(directory, filename)
        metadata["sources"][name] = str(path.parent)
        metadata[name] = _read_metadata(path.parent).get(name, {})
        if name != "memory":
            boosters[name] = TreeEnsemble.from_json(path)
    memory = MemoryModel(**json.loads(_pick(directory, MEMORY_FILE).read_text()))
    return Artifacts(
        slowdown=boosters["slowdown"], utilization=boosters["utilization"], memory=memory, metadata=metadata
    )


def save_booster(directory: str | Path, name: str, booster: xgb.Booster, entry: dict[str, Any]) -> Path:
    """Write `<name>.json` and its metadata entry into `directory` (created if needed)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    booster.save_model(path)
    _write_entry(directory, name, entry)
    return path


def save_memory(directory: str | Path, model: MemoryModel, entry: dict[str, Any]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / MEMORY_FILE
    path.write_text(json.dumps(model.to_dict(), indent=2) + "\n")
    _write_entry(directory, "memory", entry)
    return path


def _write_entry(directory: Path, name: str, entry: dict[str, Any]) -> None:
    metadata = _read_metadata(directory)
    metadata[name] = entry
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
