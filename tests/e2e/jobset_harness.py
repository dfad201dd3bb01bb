"""JobSet and Kubeflow Trainer on the local control plane, for tests/e2e/test_jobset.py: their controller
managers, CRDs and webhook configurations as hack/build-jobset.sh builds and copies them from their Go
modules (cached, like the control plane), each manager run as a local process with the admin
kubeconfig, like the other components (kueue_harness.py runs Kueue's the same way).

Webhooks: each manager's webhooks on its own resources are registered from its module's webhook
configuration as published (failurePolicy Fail), calling the local manager at https://127.0.0.1:<port>.
JobSet's mutating webhook fills in what its controller reads unset (success and startup policies,
completion mode, DNS hostnames), its validating one refuses what the controller cannot run; Trainer's
check TrainJobs and runtimes against the runtimes it knows. JobSet's two pod webhooks are left out: they
act only on JobSets asking for exclusive placement (affinities and node selectors, which Horus's webhook
refuses anyway: Horus picks the node), and registered for every pod of the cluster under failurePolicy
Fail they would make each pod's creation wait on this process. No leader election, no metrics endpoint:
nothing listens but the webhook server and the health probe, each on a free loopback port.

Certificates: the managers' internal certificate management (a rotator writing a Secret and the CA into
the webhook configurations, signing for the in-cluster Service's name) is off, and each webhook server
reads tls.crt and tls.key made by openssl, as for Horus's webhook: JobSet from the configuration's
certDir; Trainer, whose configuration has none, from controller-runtime's default
$TMPDIR/k8s-webhook-server/serving-certs, TMPDIR being the test's directory. With metrics off
(bindAddress "0") neither reads a metrics certificate.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import controller_harness
import yaml
from dljob_harness import free_port

from horus_operator import devcluster
from horus_operator.devcluster.webhook import serving_certificate
from horus_operator.testing.operator_process import REPO, terminate, wait_for

API = "jobset.x-k8s.io/v1alpha2"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"  # on each pod of a JobSet's Jobs


@functools.cache
def built(tool: str) -> Path:
    """`tool`'s manager ("jobset" or "trainer"), built on first use (the script exits at once when it is
    built); its CRDs are in `crds/` beside its `bin/`, its webhook configuration in `webhook.yaml`."""
    script = REPO / "hack" / "build-jobset.sh"
    done = subprocess.run(["bash", str(script), tool], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"hack/build-jobset.sh {tool} failed ({done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def install_crds(cluster: devcluster.LocalCluster, tool: str, *names: str) -> None:
    # Server-side: these CRDs are larger than the annotation a client-side apply keeps.
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", str(built(tool).parent.parent / "crds")
    )
    cluster.wait_established(*names)


def webhook_configurations(
    published: str, url: str, ca_bundle: bytes, *, resources: frozenset[str], prefix: str
) -> list[dict[str, Any]]:
    """The module's webhook configurations with only their webhooks on `resources`, each calling `url`
    (the manager's server) at its path, trusted by `ca_bundle`; their names prefixed by `prefix`."""
    ca = base64.b64encode(ca_bundle).decode()
    found = []
    for config in yaml.safe_load_all(published):
        if not config:
            continue
        hooks = [h for h in config["webhooks"] if all(set(r["resources"]) <= resources for r in h["rules"])]
        for hook in hooks:
            hook["clientConfig"] = {"url": url + hook["clientConfig"]["service"]["path"], "caBundle": ca}
        config["metadata"] = {"name": f"{prefix}-{config['metadata']['name']}"}
        config["webhooks"] = hooks
        found.append(config)
    return found


class Manager:
    """A controller manager in the background, its log in `directory`, its webhooks registered while it
    runs. Subclasses say which tool, its configuration, which webhooks and how to see them answer."""

    tool = ""
    resources: frozenset[str] = frozenset()  # the resources whose webhooks are registered

    def __init__(self, cluster: devcluster.LocalCluster, directory: Path) -> None:
        self.cluster = cluster
        self.directory = directory
        self.log_path = directory / f"{self.tool}.log"
        self.health_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.registered: list[str] = []

    def configuration(self, health_port: int, webhook_port: int) -> dict[str, Any]:
        raise NotImplementedError

    def certificate_dir(self) -> Path:
        raise NotImplementedError

    def answered(self) -> bool:
        """Whether the API server calls the registered webhooks (a dry run shows their answer)."""
        raise NotImplementedError

    def start(self) -> None:
        certs = self.certificate_dir()
        cert, key = serving_certificate(certs)
        cert.rename(certs / "tls.crt")  # the names controller-runtime's webhook server reads
        key.rename(certs / "tls.key")
        webhook_port = free_port()
        config = self.directory / f"{self.tool}-config.yaml"
        config.write_text(yaml.safe_dump(self.configuration(self.health_port, webhook_port)))
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "TMPDIR": str(self.directory)}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(built(self.tool)), f"--config={config}"], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_for(self._ready, timeout=90, what=f"{self.tool}'s manager to be ready")
        configs = webhook_configurations(
            (built(self.tool).parent.parent / "webhook.yaml").read_text(),
            f"https://127.0.0.1:{webhook_port}",
            (certs / "tls.crt").read_bytes(),
            resources=self.resources,
            prefix=self.tool,
        )
        self.registered = [f"{c['kind'].lower()}/{c['metadata']['name']}" for c in configs]
        items = {"apiVersion": "v1", "kind": "List", "items": configs}
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))
        wait_for(self.answered, timeout=60, what=f"{self.tool}'s webhooks to answer the API server")

    def stop(self) -> None:
        if self.registered:
            self.cluster.kubectl("delete", *self.registered, "--ignore-not-found", check=False)
        if self.process is not None:
            terminate(self.process)
            self.process = None

    def dry_run(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        args = ("create", "-n", "default", "--dry-run=server", "-o", "json", "-f", "-")
        return self.cluster.kubectl(*args, input=json.dumps(obj), check=False)

    def _ready(self) -> bool:
        return controller_harness.ready(self.process, self.health_port, self.tool, self.log_path)

    def log_tail(self, lines: int = 60) -> str:
        return controller_harness.log_tail(self.log_path, lines)


class JobSetManager(Manager):
    tool = "jobset"
    resources = frozenset({"jobsets"})

    def configuration(self, health_port: int, webhook_port: int) -> dict[str, Any]:
        """JobSet's Configuration (config.jobset.x-k8s.io/v1alpha1) for one local manager."""
        return {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(self.certificate_dir())},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }

    def certificate_dir(self) -> Path:
        return self.directory / "certs"

    def answered(self) -> bool:
        """A JobSet comes back with what JobSet's mutating webhook fills in."""
        pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
        job = {"name": "main", "template": {"spec": {"template": {"spec": pod}}}}
        probe = {
            "apiVersion": API,
            "kind": "JobSet",
            "metadata": {"name": "probe"},
            "spec": {"replicatedJobs": [job]},
        }
        created = self.dry_run(probe)
        return created.returncode == 0 and "successPolicy" in json.loads(created.stdout)["spec"]


class TrainerManager(Manager):
    tool = "trainer"
    resources = frozenset({"trainjobs", "trainingruntimes", "clustertrainingruntimes"})

    def configuration(self, health_port: int, webhook_port: int) -> dict[str, Any]:
        """Trainer's Configuration (config.trainer.kubeflow.org/v1alpha1) for one local manager."""
        return {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
        }

    def certificate_dir(self) -> Path:
        return self.directory / "k8s-webhook-server" / "serving-certs"  # under TMPDIR, the directory

    def answered(self) -> bool:
        """A TrainJob naming a kind of runtime Trainer does not know is refused by its validator."""
        ref = {"name": "probe", "apiGroup": "trainer.kubeflow.org", "kind": "NoSuchRuntime"}
        probe = {
            "apiVersion": TRAINER_API,
            "kind": "TrainJob",
            "metadata": {"name": "probe"},
            "spec": {"runtimeRef": ref},
        }
        return "unsupported runtime" in self.dry_run(probe).stderr
