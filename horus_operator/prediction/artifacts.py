"""Trained models on disk: XGBoost JSON files, the memory model and a metadata.json describing them.

A models directory holds `slowdown.json` (an XGBoost booster), `roofline.json` (the calibrated
constants of the step-time model that utilization comes from), `slowdown_prior.json` (the physical
time-sharing prior whose residual the slowdown trees learn), `memory.json` (the calibrated memory
model), `slowdown_neighbours.csv` (the measured pairs the slowdown model's
neighbour columns come from; it always travels with its `slowdown.json`) and `metadata.json` (per
model: training-data file and SHA-256, feature columns, training date, cross-validated metrics). A
directory made by `horus train` may hold only some of them; the rest come from the models shipped in
this package.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horus_operator.prediction import neighbours
from horus_operator.prediction.memory import MemoryModel
from horus_operator.prediction.roofline import RooflineConstants
from horus_operator.prediction.slowdown import SlowdownPrior
from horus_operator.prediction.trees import TreeEnsemble

if TYPE_CHECKING:  # training only: loading never imports xgboost
    import xgboost as xgb

SHIPPED_DIR = Path(__file__).with_name("models")
METADATA_FILE = "metadata.json"
BOOSTER_NAMES = ("slowdown",)
MEMORY_FILE = "memory.json"
ROOFLINE_FILE = "roofline.json"  # metadata entry "utilization": utilization is what it predicts
_FILES = {
    "slowdown": "slowdown.json",
    "slowdown_prior": "slowdown_prior.json",
    "memory": MEMORY_FILE,
    "utilization": ROOFLINE_FILE,
}
NEIGHBOURS_FILE = "slowdown_neighbours.csv"


@dataclass
class Artifacts:
    slowdown: TreeEnsemble
    slowdown_prior: SlowdownPrior
    roofline: RooflineConstants
    memory: MemoryModel
    # model name -> its metadata entry, and "sources": model name -> directory it was loaded from
    metadata: dict[str, Any] = field(default_factory=dict)
    # The measured pairs behind the slowdown model's neighbour columns; None for a model without them.
    neighbours: neighbours.NeighbourTable | None = None

    def identity(self) -> str:
        """A short hash of what the slowdown predictions were trained on (data hashes, training dates,
        not where the files lie): online correction learns residuals against exactly these models."""
        entries = {
            name: self.metadata.get(name, {}) for name in ("slowdown", "slowdown_prior", "utilization")
        }
        return hashlib.sha256(json.dumps(entries, sort_keys=True, default=str).encode()).hexdigest()[:16]


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
    metadata: dict[str, Any] = {"sources": {}}
    paths = {}
    for name, filename in _FILES.items():
        paths[name] = _pick(directory, filename)
        metadata["sources"][name] = str(paths[name].parent)
        metadata[name] = _read_metadata(paths[name].parent).get(name, {})
    slowdown = TreeEnsemble.from_json(paths["slowdown"])
    return Artifacts(
        slowdown=slowdown,
        slowdown_prior=SlowdownPrior.from_dict(
            json.loads(paths["slowdown_prior"].read_text()), str(paths["slowdown_prior"])
        ),
        roofline=RooflineConstants(**json.loads(paths["utilization"].read_text())),
        memory=MemoryModel(**json.loads(paths["memory"].read_text())),
        metadata=metadata,
        neighbours=_load_neighbours(paths["slowdown"].parent, slowdown),
    )


def load_roofline(directory: str | Path) -> RooflineConstants:
    """The roofline constants in `directory` (which need not exist yet), else the shipped ones."""
    return RooflineConstants(**json.loads(_pick(Path(directory), ROOFLINE_FILE).read_text()))


def _load_neighbours(directory: Path, model: TreeEnsemble) -> neighbours.NeighbourTable | None:
    """The neighbour table that belongs to the slowdown model in `directory`, if the model uses one."""
    if not set(neighbours.NEIGHBOUR_COLUMNS) & set(model.feature_names):
        return None
    path = directory / NEIGHBOURS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory / 'slowdown.json'} uses neighbour columns but {path} is missing")
    return read_neighbours(path)


def read_neighbours(path: Path) -> neighbours.NeighbourTable:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return neighbours.NeighbourTable(
        (row["gpu"], row["own_model"], int(row["own_batch"]), row["other_model"], int(row["other_batch"]),
         float(row["slowdown"]))
        for row in rows
    )  # fmt: skip


def save_neighbours(directory: str | Path, table: neighbours.NeighbourTable) -> Path:
    """Write the neighbour table beside slowdown.json; returns its path (hashed into the metadata)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / NEIGHBOURS_FILE
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(neighbours.MEASUREMENT_COLUMNS)
        writer.writerows(
            (gpu, own_model, own_batch, other_model, other_batch, repr(value))
            for gpu, own_model, own_batch, other_model, other_batch, value in table.measurements()
        )
    return path


def save_booster(directory: str | Path, name: str, booster: xgb.Booster, entry: dict[str, Any]) -> Path:
    """Write `<name>.json` and its metadata entry into `directory` (created if needed)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    booster.save_model(path)
    _write_entry(directory, name, entry)
    return path


def save_memory(directory: str | Path, model: MemoryModel, entry: dict[str, Any]) -> Path:
    return _save_json(directory, "memory", model.to_dict(), entry)


def save_prior(directory: str | Path, prior: SlowdownPrior, entry: dict[str, Any]) -> Path:
    return _save_json(directory, "slowdown_prior", prior.to_dict(), entry)


def save_roofline(directory: str | Path, constants: RooflineConstants, entry: dict[str, Any]) -> Path:
    return _save_json(directory, "utilization", constants.to_dict(), entry)


def _save_json(directory: str | Path, name: str, values: dict[str, float], entry: dict[str, Any]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _FILES[name]
    path.write_text(json.dumps(values, indent=2) + "\n")
    _write_entry(directory, name, entry)
    return path


def _write_entry(directory: Path, name: str, entry: dict[str, Any]) -> None:
    metadata = _read_metadata(directory)
    metadata[name] = entry
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
