"""GPU products beyond the V100s, and spec.precision, end to end: an H100 labelled as GPU Feature Discovery
labels it (`NVIDIA-H100-80GB-HBM3`, `nvidia.com/gpu.memory=81559`) is packed as the 80 GiB GPU it is, not
as a 16 GiB V100 or a 40 GiB A100; the schema refuses an unknown precision naming the field.

The H100 node is added for one test and deleted afterwards, and the nodes it cordons are uncordoned, so
the session's other tests see the cluster as before.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from dljob_harness import apply, closed_field_is_defaulted_and_checked, horus_pods, wait_phases

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import OperatorProcess, wait_for

if TYPE_CHECKING:
    from horus_operator.prediction.api import Workload

pytestmark = pytest.mark.e2e

H100 = devcluster.GpuNodePool(
    count=1,
    gpus_per_node=1,  # one GPU: jobs placed on the node share it
    gpu_product="NVIDIA-H100-80GB-HBM3",
    gpu_memory_mib=81559,  # what GFD reports for an H100 SXM5 80GB
    name_prefix="h100-node",
)
A100_40GB_MIB = 40960  # the largest GPU of the session's other nodes (conftest.E2E_POOLS)
MAX_SLOWDOWN = 5.0


@contextlib.contextmanager
def only_a_new_h100(cluster: devcluster.LocalCluster) -> Iterator[str]:
    """Cordon every schedulable node, then add the H100 node; afterwards delete it and uncordon exactly
    the nodes cordoned here. The cordons come first so that the operator, which places on a node only once
    it has seen it Ready (add_nodes waits for that), has seen them by then: one Node watch, in order."""
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    cordoned = [n["metadata"]["name"] for n in nodes if not (n.get("spec") or {}).get("unschedulable")]
    if cordoned:
        cluster.kubectl("cordon", *cordoned)
    try:
        names = cluster.add_nodes(H100)
        try:
            yield names[0]
        finally:
            cluster.kubectl("delete", "node", *names, "--wait=true", check=False)
    finally:
        if cordoned:
            cluster.kubectl("uncordon", *cordoned, check=False)


def _h100_pair() -> tuple[Workload, Workload]:
    """A big amp job that no GPU but the H100 can hold (more than 40 GiB) and a small job that shares a
    GPU well with it, as the operator's own predictor sees them on an H100: the test checks that the
    operator uses the node's 80 GiB, not which models fit."""
    from horus_operator.prediction.api import Workload  # the predictor only where it is used

    room = H100.gpu_memory_mib - 500 - 1024  # placement's memory margin, and a margin for the small job
    bigs = [
        Workload(model, batch, precision="amp")
        for model in ("bert", "vgg16", "resnet50")
        for batch in (16, 32, 64, 96, 128, 192, 256, 384, 512)
    ]
    bigs = [w for w in bigs if A100_40GB_MIB < _memory(w) < room]
    smalls = [
        Workload(model, 16, precision=precision)
        for model in ("lstm-lm", "mobilenet_v2", "resnet18", "transformer")
        for precision in ("amp", "fp32")
    ]
    scored = []
    for big in bigs:
        for small in smalls:
            slowdowns = _predictor().slowdowns("h100", [big, small])
            fits = _memory(big) + _memory(small) < room + 1024
            if fits and slowdowns is not None and max(slowdowns) < MAX_SLOWDOWN / 1.3:
                scored.append((1 / slowdowns[0] + 1 / slowdowns[1] - 1, big, small))
    assert scored, f"no amp job between 40 GiB and {room} MiB on an H100 that pairs: {bigs}"
    gain, big, small = max(scored, key=lambda s: s[0])
    # The horus policy shares a GPU when the pair gains at least 0.1 in normalised throughput.
    assert gain > 0.15, f"best H100 pair gains only {gain:.2f}: {scored}"
    return big, small


def _memory(workload: Workload) -> float:
    return _predictor().job(workload, "h100").memory_mib


def _predictor() -> Any:
    from horus_operator.prediction.predictor import load_predictor  # cached per models directory

    return load_predictor()


def _dljob(name: str, workload: Workload) -> dict[str, Any]:
    return (
        DLJobBuilder(name)
        .model(architecture=workload.model)
        .batch_size(workload.batch_size)
        .spec(precision=workload.precision, maxSlowdown=MAX_SLOWDOWN)
        .obj()
    )


def test_jobs_share_an_h100_using_its_80_gib(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    big, small = _h100_pair()
    with only_a_new_h100(cluster) as h100:
        try:
            apply(cluster, namespace, _dljob("big", big))
            jobs = wait_phases(cluster, namespace, ["big"], {"Scheduled", "Running"}, timeout=90)
            assert jobs["big"]["status"]["node"] == h100, jobs["big"]["status"]
            apply(cluster, namespace, _dljob("small", small))
            jobs = wait_phases(cluster, namespace, ["small"], {"Scheduled", "Running"}, timeout=90)

            statuses = {name: jobs[name]["status"] for name in ("big", "small")}
            for name, status in statuses.items():
                assert (status["node"], status["gpuList"]) == (h100, "0"), (name, status)
                assert [gpu["index"] for gpu in status["gpus"]] == [0], (name, status)
            assert statuses["small"]["colocatedWith"] == [f"{namespace}/big"]
            # The operator predicted with the jobs' precision and the H100's row of the GPU table.
            for name, workload in (("big", big), ("small", small)):
                assert statuses[name]["predicted"]["memoryMiB"] == pytest.approx(_memory(workload), abs=0.1)
            together = sum(status["predicted"]["memoryMiB"] for status in statuses.values())
            assert A100_40GB_MIB < together <= H100.gpu_memory_mib, statuses
            pods = {p["metadata"]["labels"]["horus.dev/dljob"]: p for p in horus_pods(cluster, namespace)}
            assert {name: pod["spec"].get("nodeName") for name, pod in pods.items()} == {
                "big": h100,
                "small": h100,
            }
            wide = cluster.kubectl("get", "dljob", "big", "-n", namespace, "-o", "wide").stdout.splitlines()
            assert "PRECISION" in wide[0].split() and "amp" in wide[1].split(), wide
        finally:
            cluster.kubectl("delete", "dljobs", "--all", "-n", namespace, "--wait=true", check=False)
            with contextlib.suppress(AssertionError):  # the node goes anyway; keep the test's own error
                wait_for(lambda: not horus_pods(cluster, namespace), timeout=60, what="the pods to go")


def test_precision_defaults_to_fp32_and_the_schema_refuses_others(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str
) -> None:
    closed_field_is_defaulted_and_checked(
        cluster, namespace, "precision", default="fp32", bad="fp16", listed=("fp32", "bf16")
    )
