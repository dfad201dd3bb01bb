"""Helpers for the e2e tests of DRA binding (test_dra.py, test_pod_route_dra.py): a kwok node of their
own, the fake agents publishing every GPU node's GPUs as ResourceSlices of driver gpu.nvidia.com (as
NVIDIA's DRA driver does on real nodes), and what the tests read back of slices and claims. The reserve
binding's tests (test_reserve.py) run the operator beside the same agents.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dljob_harness import get_json

from horus_operator import devcluster
from horus_operator.testing.operator_process import REPO, OperatorProcess, terminate, wait_for

DRA_NODE_PREFIX = "dra-node"  # the DRA tests' own node: 1 × 2 V100 16 GiB


def dra_node(cluster: devcluster.LocalCluster) -> str:
    """The DRA tests' node, added once per session."""
    existing = cluster.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    mine = [n for n in existing if n.startswith(DRA_NODE_PREFIX)]
    pool = devcluster.GpuNodePool(count=1, gpus_per_node=2, name_prefix=DRA_NODE_PREFIX)
    return mine[0] if mine else cluster.add_nodes(pool)[0]


@contextlib.contextmanager
def publishing_slices(cluster: devcluster.LocalCluster, logs: Path) -> Iterator[None]:
    """The fake agents of every GPU node, publishing ResourceSlices (and GPUNodes) until the end."""
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    argv = [sys.executable, "-c", "from horus_operator.cli import main; main()", "agent", "--backend", "fake"]
    argv += ["--all-nodes", "--metrics-port", "0", "--sample-interval", "0.5", "--publish-interval", "1"]
    with (logs / "agents.log").open("ab") as log:
        agents = subprocess.Popen(
            argv,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        nodes = cluster.kubectl(
            "get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "name"
        ).stdout.split()
        wait_for(lambda: len(slices(cluster)) == len(nodes), timeout=60, what="a ResourceSlice per GPU node")
        yield
    finally:
        terminate(agents)
        # Later modules read GPUs from GFD labels and want no silent agents' telemetry.
        cluster.kubectl("delete", "gpunodes,resourceslices", "--all", check=False)


@contextlib.contextmanager
def operator_beside_agents(
    cluster: devcluster.LocalCluster, logs: Path, settings: dict[str, str]
) -> Iterator[OperatorProcess]:
    """`horus run` with `settings`, the fake agents of every GPU node publishing meanwhile."""
    process = OperatorProcess(cluster, logs / "operator.log", settings=settings)
    with publishing_slices(cluster, logs):
        process.start()
        try:
            yield process
        finally:
            process.stop()


def slices(cluster: devcluster.LocalCluster) -> list[dict[str, Any]]:
    listing = json.loads(cluster.kubectl("get", "resourceslices", "-o", "json").stdout)
    return [s for s in listing["items"] if s["spec"]["driver"] == "gpu.nvidia.com"]


def device_uuids(cluster: devcluster.LocalCluster) -> dict[tuple[str, str], str]:
    """(pool, device) -> GPU UUID, as the ResourceSlices list them."""
    return {
        (s["spec"]["pool"]["name"], d["name"]): d["attributes"]["uuid"]["string"]
        for s in slices(cluster)
        for d in s["spec"]["devices"]
    }


def stored_claims(cluster: devcluster.LocalCluster, namespace: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in get_json(cluster, namespace, "resourceclaims")["items"]}


def allocated_uuid(claim: dict[str, Any], uuids: dict[tuple[str, str], str]) -> str | None:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    ) or []
    return uuids.get((results[0]["pool"], results[0]["device"])) if results else None
