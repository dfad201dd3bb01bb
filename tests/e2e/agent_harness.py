"""The node agents of the e2e tests: `horus agent --backend fake` processes publishing GPUNodes for the
kwok nodes (nothing runs there, so the fake NVML derives readings from the pods Horus placed, or from a
measured-pairs CSV with `--truth`), and shorthands to read what they published. The fixtures that start
them (`gpunode_crd`, `agents`) are in conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dljob_harness import free_port, get_json

from horus_operator import devcluster

NODE = "gpu-node-0"  # conftest.E2E_POOLS: 4 × V100 16 GiB


class Agents:
    """One `horus agent --backend fake` process per node, publishing every second."""

    def __init__(self, cluster: devcluster.LocalCluster, log_dir: Path) -> None:
        self.cluster, self.log_dir = cluster, log_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.metrics_ports: dict[str, int] = {}

    def start(self, *nodes: str, backend: str = "fake", kubeconfig: Path | None = None) -> None:
        for node in nodes:
            port = free_port()
            self._spawn(node, ["--node", node, "--metrics-port", str(port)], backend, kubeconfig)
            self.metrics_ports[node] = port

    def start_all(self, *, unhealthy: Sequence[str] = (), truth: Path | None = None) -> None:
        """One process running the agents of every GPU node (`--all-nodes`); `unhealthy`: NODE:INDEX;
        with `truth`, the fake NVML reports that measured-pairs CSV (`--truth`)."""
        flags = [arg for gpu in unhealthy for arg in ("--fake-unhealthy-gpu", gpu)]
        flags += ["--truth", str(truth)] if truth else []
        self._spawn("all", ["--all-nodes", "--metrics-port", "0", *flags], "fake", None)

    def _spawn(self, key: str, args: list[str], backend: str, kubeconfig: Path | None) -> None:
        argv = [sys.executable, "-c", "from horus_operator.cli import main; main()", "agent", *args]
        argv += ["--sample-interval", "0.25", "--publish-interval", "1"]
        config = kubeconfig or self.cluster.kubeconfig
        env = {**os.environ, "KUBECONFIG": str(config), "HORUS_NVML_BACKEND": backend}
        with (self.log_dir / f"agent-{key}.log").open("ab") as log:
            self.processes[key] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, *nodes: str) -> None:
        for node in nodes or list(self.processes):
            process = self.processes.pop(node)
            process.terminate()
            process.wait(timeout=30)


def gpunode(cluster: devcluster.LocalCluster, node: str = NODE) -> dict[str, Any]:
    found = cluster.kubectl("get", "gpunode", node, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else {}


def fake_nodes(cluster: devcluster.LocalCluster) -> list[str]:
    listed = get_json(cluster, "default", "nodes", "-l", devcluster.nodes.FAKE_NODE_LABEL)
    return [n["metadata"]["name"] for n in listed["items"]]
