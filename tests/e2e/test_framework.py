"""spec.framework end to end: the API server defaults it to pytorch and refuses another naming the field;
the operator predicts a TensorFlow DLJob's memory with TensorFlow's allocator (docs/prediction.md,
"TensorFlow: the allocator's arena") and a PyTorch DLJob of the same model with PyTorch's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dljob_harness import apply, closed_field_is_defaulted_and_checked, wait_phases

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.prediction.api import Workload
from horus_operator.prediction.gpus import normalize_gpu
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import OperatorProcess

pytestmark = pytest.mark.e2e

JOBS = {"torch": "pytorch", "keras": "tensorflow"}


def _dljob(name: str, framework: str) -> dict[str, Any]:
    return DLJobBuilder(name).model(architecture="resnet50").batch_size(32).spec(framework=framework).obj()


def _gpu_type(cluster: devcluster.LocalCluster, node: str) -> str:
    labels = json.loads(cluster.kubectl("get", "node", node, "-o", "json").stdout)["metadata"]["labels"]
    return normalize_gpu(labels[keys.LABEL_GPU_PRODUCT])


def test_each_job_is_predicted_with_its_frameworks_allocator(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    from horus_operator.prediction.predictor import load_predictor  # cached per models directory

    apply(cluster, namespace, *(_dljob(name, framework) for name, framework in JOBS.items()))
    jobs = wait_phases(cluster, namespace, list(JOBS), {"Scheduled", "Running"}, timeout=90)

    for name, framework in JOBS.items():
        status = jobs[name]["status"]
        gpu = _gpu_type(cluster, status["node"])
        own = load_predictor().job(Workload("resnet50", 32, framework=framework), gpu).memory_mib
        pytorch = load_predictor().job(Workload("resnet50", 32), gpu).memory_mib
        assert jobs[name]["spec"]["framework"] == framework
        assert status["predicted"]["memoryMiB"] == pytest.approx(own, abs=0.1), (name, gpu, status)
        assert (own > pytorch) if framework == "tensorflow" else (own == pytorch), (name, gpu)


def test_framework_defaults_to_pytorch_and_the_schema_refuses_others(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    closed_field_is_defaulted_and_checked(
        cluster, namespace, "framework", default="pytorch", bad="jax", listed=("pytorch", "tensorflow")
    )
