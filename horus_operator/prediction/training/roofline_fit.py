"""The roofline constants behind utilization, calibrated on measured step times or utilizations."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from horus_operator.prediction import (
    artifacts,
    datasets,
    roofline,
    validation,
)
from horus_operator.prediction.datasets import FeatureSource
from horus_operator.prediction.gpus import GpuSpec, gpu_spec, normalize_gpu
from horus_operator.prediction.training.common import (
    SEED,
    catalog_name,
    metadata_entry,
)
from horus_operator.prediction.training.families import family

# Gavel's single-job throughputs (steps/s), the step times the roofline constants are calibrated on.
STEP_TIME_CSV_COLUMNS: tuple[str, ...] = ("gpu", "model", "batch", "tput_alone")


@dataclass(frozen=True)
class JobSamples:
    """Measured single jobs: features at their batch size, the GPU's datasheet row, and a measurement."""

    jobs: list[dict[str, float]]
    specs: list[GpuSpec]
    precisions: list[str]
    measured: np.ndarray  # step time in ms, or utilization 0..1
    gpus: np.ndarray
    models: np.ndarray


def job_samples(samples: pd.DataFrame, source: FeatureSource, measured: np.ndarray) -> JobSamples:
    return JobSamples(
        jobs=[dict(job) for job in datasets.lookup_all(source, samples["model"], samples["batch"])],
        specs=[gpu_spec(gpu) for gpu in samples["gpu"]],
        precisions=list(samples["precision"]) if "precision" in samples else ["fp32"] * len(samples),
        measured=np.asarray(measured, dtype=np.float64),
        gpus=samples["gpu"].to_numpy(),
        models=samples["model"].to_numpy(),
    )


def step_times(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> np.ndarray:
    return np.array([_estimate(data, i, constants).step_ms for i in keep])


def busy_fractions(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> np.ndarray:
    return np.array([_estimate(data, i, constants).busy for i in keep])


def _estimate(data: JobSamples, index: int, constants: roofline.RooflineConstants) -> roofline.StepEstimate:
    return roofline.estimate(data.jobs[index], data.specs[index], data.precisions[index], constants)


def step_time_error(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> float:
    """Mean absolute log error of the predicted step times (robust to the few host-bound jobs whose
    time goes to work outside the graph, such as A3C's game emulator)."""
    return float(np.mean(np.abs(np.log(step_times(data, constants, keep)) - np.log(data.measured[keep]))))


def utilization_error(data: JobSamples, constants: roofline.RooflineConstants, keep: np.ndarray) -> float:
    """RMSLE on utilization in percent, as the Horus papers report it."""
    return validation.rmsle(100.0 * data.measured[keep], 100.0 * busy_fractions(data, constants, keep))


def _error_on(data: JobSamples, keep: np.ndarray) -> Callable[[roofline.RooflineConstants], float]:
    """`utilization_error` on the rows `keep`, as a function of the constants alone."""
    return lambda constants: utilization_error(data, constants, keep)


ROOFLINE_PRIOR_PULL = 0.01  # per squared log-unit from the defaults; the losses are ~0.5 log-units
CALIBRATION_RESTARTS = 5


def calibrate_roofline(
    loss: Callable[[roofline.RooflineConstants], float],
    start: roofline.RooflineConstants | None = None,
) -> roofline.RooflineConstants:
    """The constants minimising `loss`, searched in log space from `start` (Nelder-Mead, restarted:
    few parameters, a loss with kinks where a job turns host-bound). A weak pull towards the defaults
    (ROOFLINE_PRIOR_PULL) keeps a constant the data cannot see where physics puts it: without AMP
    measurements the tensor-path efficiency, without memory-bound jobs the bandwidth efficiency,
    would otherwise drift to a bound."""
    from scipy.optimize import minimize  # scipy comes with xgboost

    defaults = np.log(list(roofline.RooflineConstants().to_dict().values()))

    def penalised(x: np.ndarray) -> float:
        return loss(roofline.RooflineConstants(*np.exp(x))) + ROOFLINE_PRIOR_PULL * float(
            np.mean((x - defaults) ** 2)
        )

    # Nelder-Mead stalls on kinked losses: restart it from its own optimum until it stops improving.
    best = np.log(list(start.to_dict().values())) if start else defaults
    best_value = penalised(best)
    for _ in range(CALIBRATION_RESTARTS):
        result = minimize(
            penalised,
            best,
            method="Nelder-Mead",
            bounds=[(np.log(low), np.log(high)) for low, high in roofline.CONSTANT_BOUNDS],
            options={"maxiter": 4000, "xatol": 1e-4, "fatol": 1e-9, "adaptive": True},
        )
        improved = best_value - result.fun > 1e-7
        if result.fun < best_value:
            best, best_value = result.x, float(result.fun)
        if not improved:
            break
    return roofline.RooflineConstants(*(float(value) for value in np.exp(best)))


def held_out_step_times(data: JobSamples, groups: np.ndarray) -> dict[str, Any]:
    """Step-time error on each group (a GPU type or an architecture family) with the constants
    calibrated on the others, beside the error of one constant step time (the training median)."""
    result: dict[str, Any] = {}
    everything = np.arange(len(data.measured))
    for group in sorted(set(groups)):
        train, test = everything[groups != group], everything[groups == group]
        constants = calibrate_step_times(data, train)
        median = np.median(data.measured[train])
        result[group] = {
            "log_error": round(step_time_error(data, constants, test), 4),
            "baseline_log_error": round(float(np.mean(np.abs(np.log(median / data.measured[test])))), 4),
            "samples": len(test),
        }
    return result


# timm's model names for the catalog's torchvision models where they differ (same architecture).
TIMM_NAMES: dict[str, str] = {
    "vit_base_patch16_224": "vit_b_16",
    "vit_base_patch32_224": "vit_b_32",
    "vit_large_patch16_224": "vit_l_16",
    "mobilenetv3_large_100": "mobilenet_v3_large",
    "mobilenetv3_small_100": "mobilenet_v3_small",
    "mobilenetv2_100": "mobilenet_v2",
    "swin_tiny_patch4_window7_224": "swin_t",
    "swin_small_patch4_window7_224": "swin_s",
    "mnasnet_075": "mnasnet0_75",
    "mnasnet_100": "mnasnet1_0",
    "inception_v3": "inception_v3-imagenet",
    **{f"regnet{kind}_{size}": f"regnet_{kind}_{name}"
       for kind in ("x", "y")
       for size, name in (("004", "400mf"), ("008", "800mf"), ("016", "1_6gf"), ("032", "3_2gf"))},
}  # fmt: skip
TIMM_CSV_COLUMNS: tuple[str, ...] = (
    "layout",
    "model",
    "train_step_time",
    "train_batch_size",
    "train_img_size",
)


def timm_step_times(path: str | Path, source: FeatureSource) -> pd.DataFrame:
    """`gpu, model, batch, precision, step_ms` of timm's RTX 3090 AMP training benchmark for the
    catalog models among it: NCHW rows (the catalog's layout) at the catalog entry's image size."""
    table = datasets.read_csv(path, TIMM_CSV_COLUMNS)
    rows = []
    for layout, model, step_ms, batch, image in table[list(TIMM_CSV_COLUMNS)].itertuples(index=False):
        name = catalog_name(TIMM_NAMES.get(model, model))
        if layout != "nchw" or name is None:
            continue
        side = math.sqrt(source(name, 1)["input_bytes_per_sample"] / (3 * 4))  # 3 FP32 channels
        if round(side) == int(image):
            rows.append(("rtx-3090", name, int(batch), "amp", float(step_ms)))
    return pd.DataFrame(rows, columns=["gpu", "model", "batch", "precision", "step_ms"])


def step_time_samples(data: str | Path, source: FeatureSource, timm: str | Path | None = None) -> JobSamples:
    """Measured step times in ms: Gavel's `tput_alone` (steps/s, FP32) and, given `timm`, timm's RTX 3090
    AMP benchmark."""
    table = datasets.read_csv(data, STEP_TIME_CSV_COLUMNS)
    table["gpu"] = table["gpu"].map(normalize_gpu)
    table["precision"] = "fp32"
    table["step_ms"] = 1000.0 / table["tput_alone"]
    if timm is not None:
        table = pd.concat([table, timm_step_times(timm, source)], ignore_index=True)
    return job_samples(table, source, table["step_ms"].to_numpy())


def calibrate_step_times(data: JobSamples, keep: np.ndarray) -> roofline.RooflineConstants:
    """The roofline constants that best predict the step times of the jobs `keep` (indices)."""
    return calibrate_roofline(lambda constants: step_time_error(data, constants, keep))


def train_step_times(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    timm: str | Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Calibrate the roofline constants on measured single-job step times (Gavel's `tput_alone`, FP32,
    and, given `timm`, timm's RTX 3090 AMP benchmark); writes roofline.json. Reports the error on
    each GPU type and each architecture family held out."""
    samples = step_time_samples(data, source, timm)
    log(f"utilization: calibrating the step-time model on {len(samples.measured)} measured step times")
    everything = np.arange(len(samples.measured))
    constants = calibrate_step_times(samples, everything)
    metrics = {
        "log_error": round(step_time_error(samples, constants, everything), 4),
        "leave_one_gpu_out": held_out_step_times(samples, samples.gpus),
        "leave_one_family_out": held_out_step_times(
            samples, np.array([family(model) for model in samples.models])
        ),
    }
    entry = metadata_entry(data, list(STEP_TIME_CSV_COLUMNS), metrics, samples=len(samples.measured))
    if timm is not None:
        entry["timm_file"], entry["timm_sha256"] = Path(timm).name, datasets.sha256_of(timm)
    artifacts.save_roofline(out_dir, constants, entry)
    return {"utilization": metrics, "roofline": constants.to_dict()}


def train_utilization(
    data: str | Path,
    out_dir: str | Path,
    source: FeatureSource,
    canonical: Callable[[str], str | None],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Calibrate the roofline constants on measured utilizations (alnair's columns); writes
    roofline.json. Cross-validated leaving one model out, beside the training mean as a constant."""
    table = datasets.read_csv(data, datasets.UTILIZATION_CSV_COLUMNS)
    samples = datasets.utilization_samples(table, canonical)
    if samples.attrs["dropped"]:
        log(f"utilization: no graph features for {', '.join(samples.attrs['dropped'])}: rows dropped")
    data_set = job_samples(samples, source, samples["utilization"].to_numpy())
    actual, predicted, constant = [], [], []
    for train, test in validation.group_folds(
        samples["model"].tolist(), samples["model"].nunique(), np.random.default_rng(SEED)
    ):
        constants = calibrate_roofline(_error_on(data_set, train))
        actual.append(data_set.measured[test])
        predicted.append(busy_fractions(data_set, constants, test))
        mean_percent = np.expm1(np.mean(np.log1p(100.0 * data_set.measured[train])))
        constant.append(np.full(len(test), mean_percent / 100.0))
    percent = [100.0 * np.concatenate(values) for values in (actual, predicted, constant)]
    metrics = {
        "rmsle": round(validation.rmsle(percent[0], percent[1]), 4),
        "baseline_rmsle": round(validation.rmsle(percent[0], percent[2]), 4),
        "samples": len(percent[0]),
        "models": int(samples["model"].nunique()),
    }
    everything = np.arange(len(data_set.measured))
    constants = calibrate_roofline(lambda c: utilization_error(data_set, c, everything))
    entry = metadata_entry(data, list(datasets.UTILIZATION_CSV_COLUMNS), metrics, samples=len(samples))
    entry["dropped_models"] = samples.attrs["dropped"]
    artifacts.save_roofline(out_dir, constants, entry)
    return {"utilization": metrics, "roofline": constants.to_dict()}
