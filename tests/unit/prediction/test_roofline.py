"""The roofline step-time model: physical properties, the tensor path, and its calibration data."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus_operator.prediction import catalog, roofline
from horus_operator.prediction.api import Workload
from horus_operator.prediction.gpus import gpu_spec
from horus_operator.prediction.predictor import load_predictor
from horus_operator.prediction.training import roofline_fit

DATA = Path(__file__).resolve().parents[3] / "data"
CONSTANTS = roofline.RooflineConstants(tensor_efficiency=0.5, matmul_efficiency=0.25)


def test_a_faster_gpu_shortens_the_gpu_side_only() -> None:
    job = catalog.lookup("resnet50", 64)
    slow, fast = (roofline.estimate(job, gpu_spec(gpu), "fp32", CONSTANTS) for gpu in ("k80", "h100"))
    assert fast.gpu_ms < slow.gpu_ms
    assert fast.host_ms == slow.host_ms
    assert 0.0 < fast.busy <= slow.busy <= 1.0


def test_a_recurrent_layer_costs_the_host_one_call_however_many_time_steps_it_runs() -> None:
    # The LSTM word model: 2 layers over 35 steps run as two fused calls; the GPU still runs each step.
    job = catalog.lookup("lstm-lm", 20)
    assert job["recurrent_step_ops"] == (2 + 5) * job["recurrent_steps"]
    unrolled = dict(job, recurrent_step_ops=0.0)  # as if each unrolled op were dispatched on its own
    assert roofline.kernels_per_step(job) == roofline.kernels_per_step(unrolled)
    saved = roofline.dispatches_per_step(unrolled) - roofline.dispatches_per_step(job)
    assert saved == roofline.KERNELS_PER_OP * job["recurrent_step_ops"]
    fused, per_step = (roofline.estimate(j, gpu_spec("v100"), "fp32", CONSTANTS) for j in (job, unrolled))
    assert fused.gpu_ms == per_step.gpu_ms
    assert fused.host_ms < per_step.host_ms


def test_without_recurrent_layers_every_kernel_is_dispatched_by_the_host() -> None:
    job = catalog.lookup("resnet50", 64)
    assert roofline.dispatches_per_step(job) == roofline.kernels_per_step(job)


def test_amp_uses_the_tensor_peak_and_its_own_efficiency() -> None:
    job = catalog.lookup("vit_b_16", 64)
    spec = gpu_spec("a100-40gb")
    fp32, amp = (roofline.estimate(job, spec, precision, CONSTANTS) for precision in ("fp32", "amp"))
    assert fp32.matmul_ms / amp.matmul_ms == pytest.approx(
        (spec.fp16_tflops * CONSTANTS.tensor_efficiency) / (spec.fp32_tflops * CONSTANTS.matmul_efficiency)
    )


def test_a_gpu_without_a_tensor_path_runs_amp_at_fp32_speed() -> None:
    job = catalog.lookup("resnet50", 64)
    spec = gpu_spec("k80")
    fp32, amp = (roofline.estimate(job, spec, precision, CONSTANTS) for precision in ("fp32", "amp"))
    assert amp.matmul_ms == pytest.approx(fp32.matmul_ms)


def test_timm_rows_are_kept_only_for_catalog_models_at_the_catalogs_layout_and_image_size() -> None:
    rows = roofline_fit.timm_step_times(DATA / "throughput" / "timm_train_rtx3090_amp.csv", catalog.lookup)
    assert set(rows["gpu"]) == {"rtx-3090"} and set(rows["precision"]) == {"amp"}
    kept = set(rows["model"])
    assert {"resnet50", "vit_b_16", "mobilenet_v3_large", "regnet_y_400mf"} <= kept  # timm names mapped
    assert "resnet18" not in kept  # the catalog's resnet18 is Gavel's CIFAR-10 model (32x32)
    assert len(rows) == rows["model"].nunique()  # channels-last duplicates are dropped


def test_calibration_keeps_a_constant_the_data_cannot_see_at_its_default() -> None:
    # A loss that depends on matmul_efficiency alone: tensor_efficiency must stay where physics put it.
    found = roofline_fit.calibrate_roofline(lambda c: abs(c.matmul_efficiency - 0.3))
    assert found.matmul_efficiency == pytest.approx(0.3, rel=0.05)
    assert found.tensor_efficiency == pytest.approx(roofline.RooflineConstants().tensor_efficiency, rel=0.05)


def test_the_predictor_reports_the_roofline_step_time_a_faster_gpu_shortens() -> None:
    predictor = load_predictor()
    job = Workload("resnet50", 64)
    k80, h100 = predictor.job(job, "k80").step_s, predictor.job(job, "h100-sxm").step_s
    assert k80 is not None and h100 is not None
    assert 0 < h100 < k80
