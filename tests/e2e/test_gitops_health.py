"""What Flux and Argo CD call a DLJob, through their own code: kstatus (sigs.k8s.io/cli-utils, the library
Flux's `wait: true` and health checks use) and the Argo CD health check (manifests/argocd/dljob-health.lua)
under gopher-lua, the interpreter Argo CD embeds, both in one Go tool (hack/gitops-health, built from its
modules by hack/build-gitops-health.sh like the control plane).

On the local control plane: DLJobs that end Succeeded (kwok completes the pod), Failed (kwok fails it,
backoffLimit 0), stay Running and stay Queued (their one node's GPUs held), read back with kubectl; one
the operator has not seen yet (a server-side dry run); a finished job whose spec is edited. Then, on
statuses `reconcile.decide` writes, the edges the cluster does not reach.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from dljob_harness import apply, dljobs, only_nodes, wait_phases

from horus_operator import devcluster
from horus_operator.api import dljob
from horus_operator.operator.jobs import reconcile
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

HEALTH_LUA = REPO / "manifests" / "argocd" / "dljob-health.lua"


@pytest.fixture(scope="module")
def gitops_health() -> Path:
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "build-gitops-health.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return Path(built.stdout.strip())


def _verdicts(tool: Path, *objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {"kstatus": {status, message, conditions}, "argocd": {status, message}}."""
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    run = subprocess.run(
        [str(tool), "-lua", str(HEALTH_LUA)],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return {v["name"]: v for v in json.loads(run.stdout)}


def _health(verdict: dict[str, Any]) -> tuple[str, str]:
    return verdict["kstatus"]["status"], verdict["argocd"]["status"]


def test_flux_and_argo_cd_read_queued_running_succeeded_and_failed_dljobs(
    cluster: devcluster.LocalCluster, horus: OperatorProcess, namespace: str, gitops_health: Path
) -> None:
    node = cluster.add_nodes(devcluster.GpuNodePool(count=1, gpus_per_node=2, name_prefix="gitops-node"))[0]
    whole = {"maxSlowdown": 1.0}  # nobody shares its GPU
    # Created but not yet seen by the operator (a server-side dry run: what the API server would store).
    unseen = json.loads(
        cluster.kubectl(
            "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-",
            input=json.dumps(DLJobBuilder("unseen").obj()),
        ).stdout
    )  # fmt: skip
    assert unseen["status"] == {"observedGeneration": 0}  # the CRD's default
    with only_nodes(cluster, [node]):
        failing = DLJobBuilder("broken").runs_for("1s").spec(backoffLimit=0, **whole).obj()
        failing["spec"]["simulation"]["fail"] = True
        apply(cluster, namespace, DLJobBuilder("done").runs_for("2s").spec(**whole).obj(), failing)
        wait_phases(cluster, namespace, ["done"], {"Succeeded"}, timeout=60)
        wait_phases(cluster, namespace, ["broken"], {"Failed"}, timeout=60)
        apply(cluster, namespace, DLJobBuilder("hog").spec(gpus=2, **whole).obj())
        wait_phases(cluster, namespace, ["hog"], {"Running"}, timeout=60)
        apply(cluster, namespace, DLJobBuilder("waiter").spec(**whole).obj())
        jobs = wait_phases(cluster, namespace, ["waiter"], {"Queued"}, timeout=60)
        assert jobs["waiter"]["status"]["message"].startswith("waiting"), jobs["waiter"]["status"]
        verdicts = _verdicts(gitops_health, unseen, *jobs.values())

        # A finished job's spec edited: it acknowledges the generation and stays what it was.
        cluster.kubectl(
            "patch", "dljob", "done", "-n", namespace, "--type=merge", "-p", '{"spec":{"priority":5}}'
        )
        edited = wait_for(
            lambda: (job := dljobs(cluster, namespace)["done"])["status"]["observedGeneration"] == 2 and job,
            timeout=30,
            what="done to acknowledge generation 2",
        )
        cluster.kubectl("delete", "dljob", "--all", "-n", namespace, "--wait=false")

    assert _health(verdicts["unseen"]) == ("InProgress", "Progressing"), verdicts["unseen"]
    assert "latest observed generation is 0" in verdicts["unseen"]["kstatus"]["message"]
    assert _health(verdicts["waiter"]) == ("InProgress", "Progressing"), verdicts["waiter"]
    assert verdicts["waiter"]["kstatus"]["message"].startswith("waiting")
    assert verdicts["waiter"]["argocd"]["message"].startswith("Queued: waiting")
    assert _health(verdicts["hog"]) == ("Current", "Healthy"), verdicts["hog"]
    assert _health(verdicts["done"]) == ("Current", "Healthy"), verdicts["done"]
    assert _health(verdicts["broken"]) == ("Failed", "Degraded"), verdicts["broken"]
    stalled = verdicts["broken"]["kstatus"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in stalled] == [
        ("Stalled", "True", "BackoffLimitExceeded")
    ]
    assert verdicts["broken"]["argocd"]["message"].startswith("BackoffLimitExceeded: pod broken-0 failed")
    assert edited["metadata"]["generation"] == 2 and edited["status"]["phase"] == "Succeeded"
    assert _health(_verdicts(gitops_health, edited)["done"]) == ("Current", "Healthy")


NOW = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)


def _status(job: dict[str, Any], **context: Any) -> dict[str, Any]:
    """The status the operator writes for `job` while it has no pod."""
    ctx = reconcile.Context(now=NOW, nodes=("gpu-node-0",), **context)
    return reconcile.decide(dljob.parse(job), job.get("status") or {}, [], ctx).status


def test_the_edges_read_as_they_should(gitops_health: Path) -> None:
    """Statuses `reconcile.decide` writes, on hand-built objects: the failures the cluster test does not
    reach, a fixed spec not yet judged, and a job that failed under an operator older than the health
    conditions."""

    def job(name: str, generation: int = 1, **status: Any) -> dict[str, Any]:
        return DLJobBuilder.stored(name).generation(generation).status(**status).obj()

    base = DLJobBuilder.stored("x").obj()
    invalid = _status(base, verdict=dljob.InvalidJob("spec.batchSize", 0, "at least 1"))
    unsatisfiable = _status(base, unsatisfiable=dljob.InvalidJob("spec.gpus", 16, "no node has 16"))
    # Failed before the health conditions existed: kstatus calls it Current (it reads conditions only)
    # until the operator's first look gives it them; the Lua reads the phase meanwhile.
    old_failed = {"phase": "Failed", "observedGeneration": 1, "message": "pod x-0 failed"}
    old_failed["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    upgraded = _status(job("x", **old_failed))
    verdicts = _verdicts(
        gitops_health,
        job("queued", **_status(base, waiting_message="waiting: no GPU free")),
        job("invalid", **invalid),
        job("unsatisfiable", **unsatisfiable),
        job("fixed", generation=2, **invalid),  # its spec edited: Flux waits for the verdict again
        job("old-failed", **old_failed),
        job("upgraded", **upgraded),
    )

    assert {name: _health(v) for name, v in verdicts.items()} == {
        "queued": ("InProgress", "Progressing"),
        "invalid": ("Failed", "Degraded"),
        "unsatisfiable": ("Failed", "Degraded"),
        "fixed": ("InProgress", "Progressing"),
        "old-failed": ("Current", "Degraded"),
        "upgraded": ("Failed", "Degraded"),
    }
    reasons = {
        n: verdicts[n]["kstatus"]["conditions"][0]["reason"] for n in ("invalid", "unsatisfiable", "upgraded")
    }
    assert reasons == {
        "invalid": "InvalidSpec",
        "unsatisfiable": "Unsatisfiable",
        "upgraded": "BackoffLimitExceeded",
    }
    assert verdicts["invalid"]["argocd"]["message"].startswith("InvalidSpec: spec.batchSize=0")
    assert verdicts["fixed"]["argocd"]["message"] == "Waiting for the Horus operator to see generation 2"
