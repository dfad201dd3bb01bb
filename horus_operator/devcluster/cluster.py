"""`LocalCluster`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as local
processes on loopback, with fake GPU nodes.

Everything of one cluster lives in its state directory: pid files (`run/`), logs (`logs/`), etcd's
data, the service-account key and admin token (`pki/`), the admin `kubeconfig` and `cluster.json`
(the ports). `down()` stops exactly the recorded processes and removes the directory, so two clusters
in two directories never touch each other.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from horus_operator.devcluster import components, nodes
from horus_operator.devcluster.binaries import REPO_ROOT, ControlPlane
from horus_operator.devcluster.processes import ProcessGroup, ProcessRecord

START_TIMEOUT_SECONDS = 180.0
POLL_SECONDS = 0.25
LOG_TAIL_LINES = 30
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
# NVIDIA's DRA driver creates this DeviceClass on real clusters; on kwok the fake agents stand in for
# the driver, so the cluster carries it from the start.
GPU_DEVICE_CLASS = REPO_ROOT / "hack" / "dra" / "deviceclass-gpu.yaml"


class ClusterError(RuntimeError):
    """A start, stop or kubectl call that failed; the message carries the relevant log lines."""


def default_state_dir() -> Path:
    """HORUS_CLUSTER_DIR, else `$XDG_STATE_HOME/horus/cluster` (default ~/.local/state/horus/cluster)."""
    if "HORUS_CLUSTER_DIR" in os.environ:
        return Path(os.environ["HORUS_CLUSTER_DIR"])
    state_home = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
    return state_home / "horus" / "cluster"


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    alive: bool


@dataclass(frozen=True)
class ClusterStatus:
    state_dir: Path
    components: list[ComponentStatus]
    ports: dict[str, int]
    apiserver_ready: bool
    nodes_ready: int
    nodes_total: int

    @property
    def running(self) -> bool:
        return bool(self.components) and all(component.alive for component in self.components)


class LocalCluster:
    """One local control plane. Construct, then `up()`; any later process can reattach by state dir."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        pools: Sequence[nodes.GpuNodePool] = (nodes.GpuNodePool(),),
        control_plane: ControlPlane | None = None,
        progress: Callable[[str], None] = lambda message: None,
        timeout: float = START_TIMEOUT_SECONDS,
        scheduler_qps: int | None = None,
    ) -> None:
        """`scheduler_qps`: kube-scheduler's client rate (`components.scheduler_argv`); None: its default."""
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self.layout = components.Layout(self.state_dir)
        self.pools = list(pools)
        self.control_plane = control_plane or ControlPlane.pinned()
        self.processes = ProcessGroup(self.state_dir)
        self._progress = progress
        self._timeout = timeout
        self._scheduler_qps = scheduler_qps

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def ports(self) -> components.Ports:
        return components.Ports(**json.loads(self.layout.cluster_file.read_text())["ports"])

    def is_running(self) -> bool:
        return any(record.alive for record in self.processes.records())

    # ---- lifecycle -------------------------------------------------------------------------------

    def up(self) -> LocalCluster:
        """Start every process, create the node pools and wait until all nodes are Ready.

        On failure, stops what it started (keeping the logs) and raises ClusterError with the last
        lines of the failing process's log.
        """
        if self.is_running():
            raise ClusterError(f"a cluster is already running in {self.state_dir} (`horus cluster down`)")
        for name in BINARIES:  # a missing build fails here, before the state dir is touched
            self.control_plane.binary(name)
        self._remove_state_dir()  # a stale one from a crashed run
        self.layout.pki.mkdir(parents=True)
        ports = components.Ports.free()
        self.layout.cluster_file.write_text(json.dumps({"ports": ports.as_dict()}, indent=2) + "\n")
        token = self._write_credentials()
        try:
            self._start_control_plane(ports, token)
            self.kubectl("apply", "-f", str(GPU_DEVICE_CLASS))
            self.add_pools(self.pools)
        except BaseException:
            self.processes.stop_all()
            raise
        return self

    def down(self) -> None:
        """Stop exactly the processes `up` recorded, then remove the state directory."""
        self.processes.stop_all()
        self._remove_state_dir()

    def _remove_state_dir(self) -> None:
        """Delete the state dir, but only one `up` made (or an empty one): `--state-dir ~` must not
        cost anyone their home directory."""
        if not self.state_dir.exists():
            return
        if any(self.state_dir.iterdir()) and not self.layout.cluster_file.exists():
            raise ClusterError(f"{self.state_dir} is not a horus cluster state directory; not touching it")
        shutil.rmtree(self.state_dir)

    def add_nodes(self, pool: nodes.GpuNodePool, *, wait: bool = True) -> list[str]:
        """Create `pool.count` more fake nodes (numbered after existing ones of the same prefix)."""
        existing = self.kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
        manifests = nodes.pool_manifests(pool, nodes.next_index(existing, pool.name_prefix))
        if not manifests:
            return []
        self.kubectl(
            "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        )
        names = [manifest["metadata"]["name"] for manifest in manifests]
        if wait:
            self._wait_until(lambda: self._nodes_ready(names), f"{len(names)} fake nodes Ready", "kwok")
        return names

    def add_pools(self, pools: Sequence[nodes.GpuNodePool]) -> list[str]:
        names = []
        for pool in pools:
            self._progress(f"creating {pool.count} nodes × {pool.gpus_per_node} {pool.gpu_product}")
            names += self.add_nodes(pool)
        return names

    def fail_node(self, name: str) -> None:
        """The node's kubelet dies: kwok stops heartbeating it (its annotation goes) and it reports
        NotReady at once (the node lifecycle controller would mark it so once its lease lapsed, ~40 s
        later); the not-ready taint keeps new pods off it. Unlike a dead node's, its pods still play
        their kwok stages (kwok's pod controller keeps the nodes it once served): one that carries a
        completion delay still finishes on time unless something deletes it first."""
        self.kubectl("annotate", "node", name, f"{nodes.KWOK_NODE_ANNOTATION}-")
        patch = json.dumps(nodes.not_ready_status(datetime.now(UTC)))
        self.kubectl("patch", "node", name, "--subresource=status", "--type=strategic", "-p", patch)

    def revive_node(self, name: str) -> None:
        """Undo `fail_node`: kwok serves the node again and marks it Ready."""
        self.kubectl("annotate", "--overwrite", "node", name, f"{nodes.KWOK_NODE_ANNOTATION}=fake")
        self._wait_until(lambda: self._nodes_ready([name]), f"node {name} Ready again", "kwok")

    def restart(self, component: str) -> None:
        """Kill one control-plane process (SIGKILL: a crash) and start it again with the same flags,
        waiting until it serves again: for fault-injection tests and `bench/chaos.py`."""
        argv = self._component_argv().get(component)
        records = {record.name: record for record in self.processes.records()}
        if argv is None or component not in records:
            raise ClusterError(f"no restartable component {component!r} (one of {', '.join(records)})")
        self._progress(f"restarting {component}")
        self.processes.kill(records[component])
        # A killed listener with connections queued may hold its port a moment longer (not _wait_until:
        # the dead component is exactly what that would report).
        deadline = time.monotonic() + self._timeout
        while not all(components.port_free(port) for port in self.ports.of(component)):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{component}: its ports {self.ports.of(component)} stay taken after it died"
                )
            time.sleep(POLL_SECONDS)
        self.processes.respawn(records[component], argv, cwd=self.state_dir)
        ready = {
            "etcd": lambda: _http_ok(f"http://{components.LOOPBACK}:{self.ports.etcd_client}/health"),
            "kube-apiserver": self._apiserver_ready,
            "kube-controller-manager": lambda: _https_healthy(self.ports.controller_manager),
            "kube-scheduler": lambda: _https_healthy(self.ports.scheduler),
        }
        self._wait_until(ready.get(component, lambda: True), f"{component} serving again", component)

    def _component_argv(self) -> dict[str, list[str]]:
        layout, binary, ports = self.layout, self.control_plane.binary, self.ports
        return {
            "etcd": components.etcd_argv(binary("etcd"), layout, ports),
            "kube-apiserver": components.apiserver_argv(binary("kube-apiserver"), layout, ports),
            "kube-controller-manager": components.controller_manager_argv(
                binary("kube-controller-manager"), layout, ports
            ),
            "kube-scheduler": components.scheduler_argv(
                binary("kube-scheduler"), layout, ports, api_qps=self._scheduler_qps
            ),
            "kwok": components.kwok_argv(binary("kwok"), layout, self.control_plane.stage_files()),
        }

    def status(self) -> ClusterStatus:
        records = self.processes.records()
        ready = self.is_running() and self._apiserver_ready()
        node_states = self._node_readiness() if ready else {}
        return ClusterStatus(
            state_dir=self.state_dir,
            components=[ComponentStatus(record.name, record.pid, record.alive) for record in records],
            ports=self.ports.as_dict() if self.layout.cluster_file.exists() else {},
            apiserver_ready=ready,
            nodes_ready=sum(node_states.values()),
            nodes_total=len(node_states),
        )

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the compiled kubectl against this cluster; raises ClusterError on failure if `check`."""
        argv = [str(self.control_plane.binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise ClusterError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def wait_established(self, *crds: str, timeout: float = 60.0) -> None:
        """Until every CRD named (e.g. "dljobs.horus.dev") is Established. Right after it is applied a CRD
        has no conditions yet, and `kubectl wait` then fails at once ("accessor error") instead of
        waiting: that answer is asked again until `timeout`."""
        deadline = time.monotonic() + timeout
        names = [f"crd/{crd}" for crd in crds]
        while True:
            left = max(1, round(deadline - time.monotonic()))
            result = self.kubectl(
                "wait", "--for=condition=Established", *names, f"--timeout={left}s", check=False
            )
            if result.returncode == 0:
                return
            if "accessor error" not in result.stderr or time.monotonic() >= deadline:
                raise ClusterError(f"CRDs {', '.join(crds)} not Established: {result.stderr.strip()}")
            time.sleep(0.5)

    # ---- start-up steps --------------------------------------------------------------------------

    def _write_credentials(self) -> str:
        """A service-account signing key (openssl) and a static admin token in system:masters."""
        subprocess.run(
            ["openssl", "genrsa", "-out", str(self.layout.service_account_key), "2048"],
            check=True,
            capture_output=True,
        )
        token = secrets.token_hex(24)
        self.layout.token_file.write_text(f'{token},horus-admin,horus-admin,"system:masters"\n')
        self.layout.token_file.chmod(0o600)
        return token

    def _start_control_plane(self, ports: components.Ports, token: str) -> None:
        argv = self._component_argv()
        self._start("etcd", argv["etcd"])
        self._wait_until(
            lambda: _http_ok(f"http://{components.LOOPBACK}:{ports.etcd_client}/health"), "etcd", "etcd"
        )

        self._start("kube-apiserver", argv["kube-apiserver"])
        self._wait_until(self._apiserver_ready_with(token), "kube-apiserver /readyz", "kube-apiserver")
        self._write_kubeconfig(ports, token)

        self._start("kube-controller-manager", argv["kube-controller-manager"])
        self._start("kube-scheduler", argv["kube-scheduler"])
        for name, port in (
            ("kube-controller-manager", ports.controller_manager),
            ("kube-scheduler", ports.scheduler),
        ):
            self._wait_until(functools.partial(_https_healthy, port), f"{name} /healthz", name)
        self._start("kwok", argv["kwok"])

    def _start(self, name: str, argv: list[str]) -> ProcessRecord:
        self._progress(f"starting {name}")
        return self.processes.start(name, argv, cwd=self.state_dir)

    def _apiserver_ready_with(self, token: str) -> Callable[[], bool]:
        def ready() -> bool:
            if not self.layout.serving_cert.exists():
                return False
            context = ssl.create_default_context(cafile=str(self.layout.serving_cert))
            url = f"https://{components.LOOPBACK}:{self.ports.apiserver}/readyz"
            return _http_ok(url, context=context, token=token)

        return ready

    def _apiserver_ready(self) -> bool:
        token = self.layout.token_file.read_text().split(",", 1)[0]
        return self._apiserver_ready_with(token)()

    def _write_kubeconfig(self, ports: components.Ports, token: str) -> None:
        # JSON is YAML: kubectl and every client library read it.
        certificate = base64.b64encode(self.layout.serving_cert.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "horus-local",
                    "cluster": {
                        "server": f"https://{components.LOOPBACK}:{ports.apiserver}",
                        "certificate-authority-data": certificate,
                    },
                }
            ],
            "users": [{"name": "horus-admin", "user": {"token": token}}],
            "contexts": [
                {"name": "horus-local", "context": {"cluster": "horus-local", "user": "horus-admin"}}
            ],
            "current-context": "horus-local",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2) + "\n")
        self.kubeconfig.chmod(0o600)

    # ---- readiness -------------------------------------------------------------------------------

    def _node_readiness(self) -> dict[str, bool]:
        """Fake node name -> Ready and schedulable (the not-ready taint lifted)."""
        listing = json.loads(
            self.kubectl("get", "nodes", "-l", f"{nodes.FAKE_NODE_LABEL}=true", "-o", "json").stdout
        )
        return {item["metadata"]["name"]: _node_schedulable(item) for item in listing["items"]}

    def _nodes_ready(self, names: list[str]) -> bool:
        readiness = self._node_readiness()
        return all(readiness.get(name, False) for name in names)

    def _wait_until(self, condition: Callable[[], bool], what: str, log_name: str) -> None:
        """Poll `condition`; fail fast with a log tail if any started process exits meanwhile."""
        deadline = time.monotonic() + self._timeout
        while True:
            for record in self.processes.records():
                if not record.alive:
                    raise ClusterError(
                        self._failure(record.name, f"{record.name} exited while waiting for {what}")
                    )
            if condition():
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    self._failure(log_name, f"timed out after {self._timeout:.0f}s waiting for {what}")
                )
            time.sleep(POLL_SECONDS)

    def _failure(self, name: str, reason: str) -> str:
        log = self.processes.log_path(name)
        lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if log.exists() else []
        return "\n".join([reason, f"--- last lines of {log} ---", *lines])


def _node_schedulable(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    tainted = any(taint["key"] == NOT_READY_TAINT for taint in node.get("spec", {}).get("taints", []))
    return ready and not tainted


def _http_ok(url: str, *, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _https_healthy(port: int) -> bool:
    """kube-scheduler and kube-controller-manager serve /healthz with a throwaway self-signed cert."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # loopback only, and the check reads nothing but "ok"
    return _http_ok(f"https://{components.LOOPBACK}:{port}/healthz", context=context)
