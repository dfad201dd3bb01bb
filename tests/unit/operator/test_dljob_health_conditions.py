"""The health conditions GitOps tools read (operator/jobs/health.py): Ready, Reconciling and Stalled per
phase, written beside the existing conditions by `reconcile.decide`, and kept right across transitions,
finished jobs, edited specs and jobs that ended before they existed. What kstatus and Argo CD make of
them is checked through their own code on real objects in tests/e2e/test_gitops_health.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_builders import PodBuilder

from horus_operator.api import dljob
from horus_operator.operator.jobs import health, pods, reconcile
from horus_operator.testing.builders import DLJobBuilder

REPO = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 12, 2, 10, 10, tzinfo=UTC)


def _decide(
    body: dict[str, Any], *builders: PodBuilder, now: datetime = NOW, **context: Any
) -> dict[str, Any]:
    ctx = reconcile.Context(now=now, nodes=("gpu-node-0",), **context)
    views = [pods.view(b.obj()) for b in builders]
    return reconcile.decide(dljob.parse(body), body.get("status") or {}, views, ctx).status


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def _health(status: dict[str, Any]) -> tuple[str, str, str]:
    found = _conditions(status)
    return found["Ready"][0], found["Reconciling"][0], found["Stalled"][0]


JOB = DLJobBuilder.stored("cnn").spec(backoffLimit=0).obj()


@pytest.mark.parametrize(
    ("pod_phase", "phase", "ready", "reconciling", "stalled", "reason"),
    [
        (None, "Queued", "False", "True", "False", "Queued"),
        ("Pending", "Scheduled", "False", "True", "False", "Scheduled"),
        ("Running", "Running", "True", "False", "False", "Running"),
        ("Succeeded", "Succeeded", "True", "False", "False", "Succeeded"),
        ("Failed", "Failed", "False", "False", "True", "BackoffLimitExceeded"),
    ],
)
def test_each_phase_has_its_health(
    pod_phase: str | None, phase: str, ready: str, reconciling: str, stalled: str, reason: str
) -> None:
    builders = [PodBuilder("cnn").bound().phase(pod_phase)] if pod_phase else []
    status = _decide(JOB, *builders)
    assert status["phase"] == phase
    assert _health(status) == (ready, reconciling, stalled)
    assert {_conditions(status)[kind][1] for kind in health.TYPES} == {reason}
    for condition in status["conditions"]:
        if condition["type"] in health.TYPES:
            assert condition["observedGeneration"] == 1
            true_or_ready = condition["status"] == "True" or condition["type"] == "Ready"
            assert (
                (condition["message"] == status["message"]) if true_or_ready else condition["message"] == ""
            )


def test_the_existing_conditions_are_unchanged_and_come_first() -> None:
    status = _decide(JOB, PodBuilder("cnn").bound().phase("Succeeded"))
    kinds = [c["type"] for c in status["conditions"]]
    assert kinds == ["Scheduled", "Running", "Complete", "Ready", "Reconciling", "Stalled"]
    assert _conditions(status)["Complete"] == ("True", "PodSucceeded")
    assert _conditions(status)["Running"] == ("False", "Completed")


@pytest.mark.parametrize(
    ("context", "reason"),
    [
        ({"verdict": dljob.InvalidJob("spec.batchSize", 0, "at least 1")}, "InvalidSpec"),
        ({"unsatisfiable": dljob.InvalidJob("spec.gpus", 16, "no node has 16")}, "Unsatisfiable"),
    ],
)
def test_a_failed_job_is_stalled_with_the_failures_reason_and_message(
    context: dict[str, Any], reason: str
) -> None:
    status = _decide(JOB, **context)
    assert _health(status) == ("False", "False", "True")
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (
        (stalled["reason"], stalled["message"])
        == (failed["reason"], failed["message"])
        == (reason, status["message"])
    )


def test_transition_times_move_only_when_a_condition_flips() -> None:
    queued = _decide(JOB)
    later = NOW + timedelta(seconds=30)
    still = _decide(
        DLJobBuilder.stored("cnn").status(**queued).obj(), now=later, waiting_message="waiting: full"
    )
    running = _decide(
        DLJobBuilder.stored("cnn").status(**still).obj(),
        PodBuilder("cnn").bound().phase("Running"),
        now=later,
    )

    def stamp(status: dict[str, Any], kind: str) -> str:
        return next(c["lastTransitionTime"] for c in status["conditions"] if c["type"] == kind)

    assert stamp(still, "Reconciling") == stamp(queued, "Reconciling") == "2026-12-02T10:10:00Z"
    assert stamp(running, "Reconciling") == stamp(running, "Ready") == "2026-12-02T10:10:30Z"
    assert stamp(running, "Stalled") == "2026-12-02T10:10:00Z"  # False all along


def test_a_retry_after_a_failed_pod_is_reconciling_not_stalled() -> None:
    job = DLJobBuilder.stored("cnn").spec(backoffLimit=1).obj()
    status = _decide(job, PodBuilder("cnn").bound().phase("Failed"))
    assert status["phase"] == "Queued"
    assert _health(status) == ("False", "True", "False")


def test_a_finished_job_acknowledges_a_new_generation_and_stays_as_it_ended() -> None:
    ended = _decide(JOB, PodBuilder("cnn").bound().phase("Succeeded"))
    edited = DLJobBuilder.stored("cnn").generation(2).status(**ended).obj()
    status = _decide(edited, PodBuilder("cnn").bound().phase("Succeeded"), now=NOW + timedelta(hours=1))
    assert status == {**ended, "observedGeneration": 2}
    failed = _decide(JOB, PodBuilder("cnn").bound().phase("Failed"))
    edited = DLJobBuilder.stored("cnn").generation(3).status(**failed).obj()
    assert _decide(edited) == {
        **failed,
        "observedGeneration": 3,
    }  # BackoffLimitExceeded: spec edits fix nothing


def test_a_job_that_ended_before_the_health_conditions_gains_them_once() -> None:
    old = {
        "phase": "Failed",
        "observedGeneration": 1,
        "message": "pod cnn-0 failed (1 failures > backoffLimit 0)",
        "completionTime": "2026-12-01T00:00:00Z",
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}
        ],
    }
    status = _decide(DLJobBuilder.stored("cnn").status(**old).obj())
    assert _health(status) == ("False", "False", "True")
    assert _conditions(status)["Stalled"] == ("True", "BackoffLimitExceeded")
    assert status["conditions"][0] == old["conditions"][0]
    assert {k: v for k, v in status.items() if k != "conditions"} == {
        k: v for k, v in old.items() if k != "conditions"
    }
    assert _decide(DLJobBuilder.stored("cnn").status(**status).obj()) == status  # then left alone
    succeeded = _decide(DLJobBuilder.stored("cnn").status(phase="Succeeded", observedGeneration=1).obj())
    assert _conditions(succeeded)["Ready"] == ("True", "Succeeded")


def test_the_crd_defaults_observed_generation_to_zero_for_jobs_not_yet_seen() -> None:
    """kstatus reads generation 1 against 0 as InProgress: a `wait: true` started before the operator
    writes waits for it (without the default it would find no status and call the job Current)."""
    for path in ("crds/dljob.yaml", "charts/horus/crds/dljob.yaml"):
        version = yaml.safe_load((REPO / path).read_text())["spec"]["versions"][0]
        assert version["schema"]["openAPIV3Schema"]["properties"]["status"]["default"] == {
            "observedGeneration": 0
        }


def test_the_argocd_cm_snippet_holds_the_shipped_lua() -> None:
    snippet = yaml.safe_load((REPO / "manifests/argocd/argocd-cm-dljob-health.yaml").read_text())
    lua = (REPO / "manifests/argocd/dljob-health.lua").read_text()
    assert snippet["metadata"]["name"] == "argocd-cm"
    assert snippet["data"] == {"resource.customizations.health.horus.dev_DLJob": lua}
