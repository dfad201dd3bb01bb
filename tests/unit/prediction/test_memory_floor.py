"""The memory floor: never above a measured peak, and what decides that no GPU can hold a job."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from horus_operator.placement.feasibility import Capacity, unsatisfiable
from horus_operator.placement.types import ClusterSnapshot, Gpu, JobRequest, Node
from horus_operator.prediction import artifacts, catalog, load_predictor
from horus_operator.prediction.api import Workload
from horus_operator.prediction.training import common, memory_fit

DATA = Path(__file__).resolve().parents[3] / "data"


def test_the_shipped_floor_is_never_above_a_measured_peak() -> None:
    samples = memory_fit.peak_samples(DATA / "memory" / "milabench_scaling_nvidia.csv", common.catalog_name)
    model = artifacts.load().memory
    jobs = [
        catalog.lookup(model_name, batch)
        for model_name, batch in zip(samples["model"], samples["batch"], strict=True)
    ]
    floors = np.array(
        [model.floor_mib(job, precision) for job, precision in zip(jobs, samples["precision"], strict=True)]
    )
    assert (floors <= samples["measured_mib"].to_numpy() + 1e-6).all()


def _v100_cluster() -> Capacity:
    gpus = tuple(Gpu.labelled("n0", index, "Tesla-V100-SXM2-16GB", 16384) for index in range(4))
    return Capacity.of(ClusterSnapshot(nodes=(Node(name="n0", gpus=gpus),), running=()))


def test_a_job_gavel_ran_alone_on_a_v100_is_not_refused() -> None:
    # ResNet-50 at batch 128: Gavel measured it alone on a 16 GB V100; the packing envelope says 20 GiB.
    predictor = load_predictor()
    request = JobRequest(key="r", workload=Workload("resnet50", 128))
    assert predictor.job(request.workload, "v100").memory_mib > 16384
    assert unsatisfiable(request, _v100_cluster(), predictor.job) is None


def test_a_job_even_the_floor_puts_above_every_gpu_is_refused() -> None:
    request = JobRequest(key="r", workload=Workload("vgg16", 65536))
    verdict = unsatisfiable(request, _v100_cluster(), load_predictor().job)
    assert verdict is not None and "least GPU memory" in verdict.message
