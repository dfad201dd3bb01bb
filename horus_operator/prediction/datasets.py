"""Training data: measurement CSVs (the shared data's column formats) read into sample tables.

`pair_samples` turns co-location measurements into one row per job per pair (each pair in both
orderings); `utilization_samples` turns single-job measurements into one row per job. Model names are
resolved by the caller's `FeatureSource` (the catalog by default); names it cannot resolve are reported,
never guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from horus_operator.prediction.api import UnknownModelError
from horus_operator.prediction.gpus import normalize_gpu

# (model name, batch size) -> graph features
FeatureSource = Callable[[str, int], Mapping[str, float]]

PAIR_CSV_COLUMNS: tuple[str, ...] = (
    "gpu", "model_a", "batch_a", "model_b", "batch_b",
    "tput_a_alone", "tput_b_alone", "tput_a_shared", "tput_b_shared",
)  # fmt: skip
UTILIZATION_CSV_COLUMNS: tuple[str, ...] = ("Model", "BS", "GPU_Util_%_ran", "MGMAP")
# The alnair data set was measured on one P100 (Colab); it has no GPU column.
UTILIZATION_CSV_GPU = "p100"


def sha256_of(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_csv(path: str | Path, required: tuple[str, ...]) -> pd.DataFrame:
    """The CSV at `path`; ValueError naming the missing columns if any of `required` is absent."""
    table = pd.read_csv(path, skipinitialspace=True)
    table.columns = [str(column).strip() for column in table.columns]
    missing = [column for column in required if column not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    return table


def pair_samples(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per job per measured pair: `gpu, own_model, own_batch, other_model, other_batch,
    slowdown, feasible, pair_id, own_config, other_config, placeholder`.

    `feasible` is False where the shared throughputs are 0 (Gavel: out of memory or not measured);
    their slowdown is NaN. `placeholder` marks pairs whose shared throughputs equal the alone ones on
    both sides (slowdown exactly 1), which look like unmeasured placeholders.
    """
    pairs = pairs.reset_index(drop=True)
    gpu = pairs["gpu"].map(normalize_gpu)
    feasible = (pairs["tput_a_shared"] > 0) & (pairs["tput_b_shared"] > 0)
    placeholder = (pairs["tput_a_shared"] == pairs["tput_a_alone"]) & (
        pairs["tput_b_shared"] == pairs["tput_b_alone"]
    )
    config_a = pairs["model_a"] + "@" + pairs["batch_a"].astype(str)
    config_b = pairs["model_b"] + "@" + pairs["batch_b"].astype(str)
    # The pair identity ignores the GPU: held out together on every GPU type.
    pair_id = [" + ".join(sorted(configs)) for configs in zip(config_a, config_b, strict=True)]
    halves = []
    for own, other in (("a", "b"), ("b", "a")):
        shared = pairs[f"tput_{own}_shared"].where(feasible)
        halves.append(
            pd.DataFrame(
                {
                    "gpu": gpu,
                    "own_model": pairs[f"model_{own}"],
                    "own_batch": pairs[f"batch_{own}"].astype(int),
                    "other_model": pairs[f"model_{other}"],
                    "other_batch": pairs[f"batch_{other}"].astype(int),
                    "slowdown": pairs[f"tput_{own}_alone"] / shared,
                    "feasible": feasible,
                    "pair_id": pair_id,
                    "own_config": config_a if own == "a" else config_b,
                    "other_config": config_b if own == "a" else config_a,
                    "placeholder": placeholder,
                    "row": pairs.index,
                }
            )
        )
    return pd.concat(halves, ignore_index=True)


def utilization_samples(table: pd.DataFrame, canonical: Callable[[str], str | None]) -> pd.DataFrame:
    """One row per measured job: `gpu, model, batch, utilization (0..1), memory_fraction (0..1)`.

    `canonical` maps the data set's model names to feature-source names (None: not describable; such
    rows are dropped and listed in the `dropped` attribute of the result).
    """
    names = table["Model"].astype(str).str.strip()
    resolved = names.map(canonical)
    samples = pd.DataFrame(
        {
            "gpu": UTILIZATION_CSV_GPU,
            "model": resolved,
            "source_model": names,
            "batch": table["BS"].astype(int),
            "utilization": table["GPU_Util_%_ran"].astype(float) / 100.0,
            "memory_fraction": table["MGMAP"].astype(float) / 100.0,
        }
    )
    kept = samples[samples["model"].notna()].reset_index(drop=True)
    kept.attrs["dropped"] = sorted(set(names[resolved.isna()]))
    return kept


def lookup_all(source: FeatureSource, models: pd.Series, batches: pd.Series) -> list[Mapping[str, float]]:
    """Features of every (model, batch) row, looked up once per distinct configuration."""
    cache: dict[tuple[str, int], Mapping[str, float]] = {}
    rows = []
    for number, (model, batch) in enumerate(zip(models, batches, strict=True)):
        key = (str(model), int(batch))
        if key not in cache:
            try:
                cache[key] = source(*key)
            except UnknownModelError as error:
                raise UnknownModelError(f"row {number + 1}: {error}") from error
        rows.append(cache[key])
    return rows
