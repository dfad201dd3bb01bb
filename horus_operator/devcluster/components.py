"""Command lines of the control-plane processes. Everything listens on 127.0.0.1 only.

Pure functions of the state-directory layout and the ports chosen at start, so the flags can be
read (and unit-tested) in one place.
"""

from __future__ import annotations

import random
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
NODE_LEASE_SECONDS = 40  # what kwokctl uses; kwok renews each fake node's lease well within it

# kube-controller-manager runs only what the project relies on: the garbage collector (owner
# references cascade), namespace deletion, node lifecycle (lifts the not-ready taint admission puts
# on new nodes), the workload controllers, pod GC and the ResourceClaim controller (it removes ended
# pods from a claim's reservations, then deallocates the claim and lets a deleted one go). Controllers
# that need a cloud provider, a kubelet, volumes or certificates stay off.
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "job-controller",
    "replicaset-controller",
    "deployment-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    "resourceclaim-controller",
)


PORT_RANGE = (20000, 32000)  # [low, high): registered ports, below Linux's ephemeral range


def port_free(port: int, *, reuse_address: bool = True) -> bool:
    """Whether a listener could bind `port` now. With `reuse_address` (what Go's net.Listen sets,
    so what the components see), connections left in TIME_WAIT do not count."""
    with socket.socket() as probe:
        if reuse_address:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def free(cls) -> Ports:
        """Five distinct ports free now, below the kernel's ephemeral range (32768 and up on Linux):
        a component restarted later (LocalCluster.restart) must get its port back, and a port in the
        ephemeral range can meanwhile be taken as the source port of some outgoing connection."""
        chooser = random.SystemRandom()
        chosen: list[int] = []
        while len(chosen) < 5:
            port = chooser.randrange(*PORT_RANGE)
            if port not in chosen and port_free(port, reuse_address=False):
                chosen.append(port)
        return cls(*chosen)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def of(self, component: str) -> tuple[int, ...]:
        """The ports `component` listens on (none for kwok)."""
        return {
            "etcd": (self.etcd_client, self.etcd_peer),
            "kube-apiserver": (self.apiserver,),
            "kube-controller-manager": (self.controller_manager,),
            "kube-scheduler": (self.scheduler,),
        }.get(component, ())


@dataclass(frozen=True)
class Layout:
    """Files of one cluster under its state directory."""

    state_dir: Path

    @property
    def etcd_data(self) -> Path:
        return self.state_dir / "etcd-data"

    @property
    def pki(self) -> Path:
        return self.state_dir / "pki"

    @property
    def service_account_key(self) -> Path:
        return self.pki / "service-account.key"

    @property
    def token_file(self) -> Path:
        return self.pki / "tokens.csv"

    @property
    def serving_cert(self) -> Path:
        """Self-signed by kube-apiserver in --cert-dir on first start; the kubeconfig trusts it."""
        return self.pki / "apiserver.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def cluster_file(self) -> Path:
        return self.state_dir / "cluster.json"


def etcd_argv(etcd: Path, layout: Layout, ports: Ports) -> list[str]:
    client = f"http://{LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [
        str(etcd),
        "--name=horus",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=horus={peer}",
        "--auto-compaction-retention=1",
        "--unsafe-no-fsync",  # a throwaway dev cluster: durability only costs disk latency
        "--quota-backend-bytes=8589934592",
    ]


def apiserver_argv(binary: Path, layout: Layout, ports: Ports) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers=http://{LOOPBACK}:{ports.etcd_client}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={layout.pki}",
        f"--token-auth-file={layout.token_file}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={layout.service_account_key}",
        f"--service-account-signing-key-file={layout.service_account_key}",
        "--service-cluster-ip-range=10.96.0.0/16",
        # No kubelet mounts service-account tokens here, and the admission plugin would make the
        # first pod of a fresh namespace wait for its default ServiceAccount.
        "--disable-admission-plugins=ServiceAccount",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
        # One developer, two cores: priority-and-fairness queues only cost CPU here.
        "--enable-priority-and-fairness=false",
        "--profiling=false",
    ]


def _component_base_flags(layout: Layout, port: int) -> list[str]:
    return [
        f"--kubeconfig={layout.kubeconfig}",
        f"--authentication-kubeconfig={layout.kubeconfig}",
        f"--authorization-kubeconfig={layout.kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--profiling=false",
    ]


def controller_manager_argv(binary: Path, layout: Layout, ports: Ports) -> list[str]:
    return [
        str(binary),
        *_component_base_flags(layout, ports.controller_manager),
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={layout.service_account_key}",
    ]


def scheduler_argv(binary: Path, layout: Layout, ports: Ports, *, api_qps: int | None = None) -> list[str]:
    """`api_qps`: kube-scheduler's client rate to the API server (burst twice that). None keeps its
    default, 50 a second, which also caps the pods it binds a second (one binding request each)."""
    rate = [] if api_qps is None else [f"--kube-api-qps={api_qps}", f"--kube-api-burst={2 * api_qps}"]
    # -v=2: each binding and each unschedulable attempt is logged, what a pod that never ran needs.
    return [str(binary), *_component_base_flags(layout, ports.scheduler), *rate, "-v=2"]


def kwok_argv(binary: Path, layout: Layout, stage_files: list[Path]) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={layout.kubeconfig}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--cidr=10.244.0.0/16",
        "--node-ip=10.0.0.1",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        *(f"--config={path}" for path in stage_files),
    ]
