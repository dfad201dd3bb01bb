"""Kueue on the local control plane, for tests/e2e/test_kueue.py: its manager and CRDs as
hack/build-kueue.sh builds them from Kueue's Go module (cached, like the control plane), the manager run
as a local process with the admin kubeconfig, like the other components.

The manager serves Kueue's webhooks (controller-runtime starts the server for the handlers Kueue always
registers) but no webhook configuration registers them: the flow needs none of them. Kueue's Job webhook
suspends a Job that names a queue and validates Jobs and their updates; the tests create their Jobs
suspended, as it would leave them. Only the batch/job integration is on, no visibility server, no
metrics endpoint, no leader election: nothing listens but the webhook and the health probe, each on a
free loopback port.

Certificates: with Kueue's internal certificate management on, its rotator (by its code; not tried)
waits until it has written its CA into the conversion webhooks of five of its CRDs, which the CRD bases
do not have, and signs for the in-cluster Service's name; so it is off, and the certificate comes from
openssl, as for Horus's webhook. Off, Kueue v0.17 also reads a metrics certificate from the fixed path
/etc/kueue/metrics/certs (even with metrics disabled) and exits without one. Rather than write under the
host's /etc, the manager runs in a mount namespace of its own (`unshare`) in which /etc is an overlay
of the host's with that directory added.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import controller_harness
import yaml
from dljob_harness import free_port

from horus_operator import devcluster
from horus_operator.devcluster.webhook import serving_certificate
from horus_operator.testing.operator_process import REPO, terminate, wait_for

API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
CRDS = ("clusterqueues", "localqueues", "resourceflavors", "workloads")  # the ones the tests use


@functools.cache
def kueue_binary() -> Path:
    """The manager, built on first use (the script exits at once when it is built); its CRDs are in
    `crds/` beside its `bin/`."""
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "build-kueue.sh")], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        raise RuntimeError(f"hack/build-kueue.sh failed ({built.returncode}): {built.stderr[-2000:]}")
    return Path(built.stdout.strip().splitlines()[-1])


def install_crds(cluster: devcluster.LocalCluster) -> None:
    # Server-side: the Workload CRD is larger than the annotation a client-side apply keeps.
    crds = kueue_binary().parent.parent / "crds"
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
    cluster.wait_established(*(f"{name}.kueue.x-k8s.io" for name in CRDS))


def configuration(certs: Path, health_port: int, webhook_port: int) -> dict:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for one local manager."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "default",  # where Kueue would keep its own objects: none with this configuration
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job"]},
    }


def _private_mounts() -> list[str]:
    """`unshare` into a mount namespace of its own: as root directly, else as root of a user namespace."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "--propagation", "private"]


class KueueManager:
    """Kueue's manager in the background, its log in `directory`."""

    def __init__(self, cluster: devcluster.LocalCluster, directory: Path) -> None:
        self.cluster = cluster
        self.directory = directory
        self.log_path = directory / "kueue.log"
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        certs = self._certificate()
        config = self.directory / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(configuration(certs, self.health_port, free_port())))
        kueue = f"{kueue_binary()} --config={config} --feature-gates=VisibilityOnDemand=false"
        overlay = f"lowerdir=/etc,upperdir={self.directory / 'etc'},workdir={self.directory / 'etc-work'}"
        argv = [*_private_mounts(), "sh", "-c", f"mount -t overlay overlay -o {overlay} /etc && exec {kueue}"]
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, timeout=90, what="Kueue's manager to be ready")

    def _certificate(self) -> Path:
        """A certificate for the webhook and (unused) metrics servers, where Kueue looks for the latter:
        etc/kueue/metrics/certs/tls.{crt,key}, the upper layer of the manager's /etc."""
        certs = self.directory / "etc" / "kueue" / "metrics" / "certs"
        cert, key = serving_certificate(certs)
        cert.rename(certs / "tls.crt")  # the names controller-runtime and Kueue read
        key.rename(certs / "tls.key")
        (self.directory / "etc-work").mkdir()
        return certs

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process)
            self.process = None

    def _ready(self) -> bool:
        return controller_harness.ready(self.process, self.health_port, "Kueue", self.log_path)

    def log_tail(self, lines: int = 60) -> str:
        return controller_harness.log_tail(self.log_path, lines)
