"""A move as DLJob status records it (operator/moves/migration.py), and what reconcile.decide does at
each step: stop the old pod with the grace period, wait while any pod of the job exists, then start on
the target."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from operator_builders import PodBuilder

from horus_operator.api import dljob
from horus_operator.operator.jobs import pods, reconcile
from horus_operator.operator.moves import migration
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 10, 10, tzinfo=UTC)
MOVING = {
    "from": "gpu-node-0/0",
    "to": "gpu-node-1/2",
    "reason": "observed slowdown 2.60x above maxSlowdown 2.00",
    "trigger": "over-limit",
    "at": "2026-12-02T10:00:00Z",
    "attempt": 0,
    "state": "Moving",
}


def _job(**status: object) -> dict:
    job = DLJobBuilder.stored("cnn").spec(migration={"allowed": True, "gracePeriodSeconds": 45})
    return job.status(**status).obj()


def _decide(body: dict, *builders: PodBuilder) -> reconcile.Decision:
    ctx = reconcile.Context(now=NOW, nodes=("gpu-node-0", "gpu-node-1"))
    views = [pods.view(b.obj()) for b in builders]
    return reconcile.decide(dljob.parse(body), body.get("status") or {}, views, ctx)


def test_the_spec_says_whether_a_job_may_move_and_its_grace_period() -> None:
    assert (dljob.parse(_job()).migration_allowed, dljob.parse(_job()).grace_period_s) == (True, 45)
    plain = dljob.parse(DLJobBuilder.stored("cnn").obj())
    assert (plain.migration_allowed, plain.grace_period_s) == (False, 30)
    # Stored without the schema: only an explicit true allows, and a negative grace is none.
    odd = DLJobBuilder.stored("cnn").spec(migration={"allowed": "true", "gracePeriodSeconds": -5}).obj()
    assert (dljob.parse(odd).migration_allowed, dljob.parse(odd).grace_period_s) == (False, 0)


def test_the_running_old_pod_is_deleted_with_the_jobs_grace_period() -> None:
    decision = _decide(_job(moves=[MOVING]), PodBuilder("cnn").bound().phase("Running"))
    assert (decision.delete_pods, decision.delete_grace_s, decision.place_attempt) == (("cnn-0",), 45, None)
    assert decision.status["phase"] == "Queued"
    assert decision.status["message"].startswith("moving to gpu-node-1/2: stopping pod cnn-0")
    assert decision.status["moves"] == [MOVING]


def test_nothing_starts_while_a_pod_of_the_job_still_exists() -> None:
    stopping = PodBuilder("cnn").bound().phase("Succeeded").deleting()  # checkpointed and exited 0
    decision = _decide(_job(moves=[MOVING]), stopping)
    assert (decision.delete_pods, decision.place_attempt) == ((), None)
    assert decision.status["phase"] == "Queued", "a pod stopped for a move is no success"
    assert "waiting for pod cnn-0 to stop" in decision.status["message"]


def test_once_the_old_pod_is_gone_the_next_pod_goes_to_the_target() -> None:
    decision = _decide(_job(moves=[MOVING]))
    assert decision.place_attempt == 1, "never the number of the pod moved from, though it is gone"
    assert decision.move_to == migration.InProgress(attempt=0, node="gpu-node-1", gpu_indices=(2,))


def test_the_new_pod_settles_the_move_where_it_went() -> None:
    new = PodBuilder("cnn", attempt=1).on("gpu-node-1", 3).bound().phase("Running")
    decision = _decide(_job(moves=[MOVING]), new)
    ((moved),) = decision.status["moves"]
    assert (moved["state"], moved["to"]) == ("Moved", "gpu-node-1/3")
    assert (decision.status["phase"], decision.place_attempt, decision.move_to) == ("Running", None, None)


def test_an_old_pod_that_ends_by_itself_before_the_delete_decides_the_job() -> None:
    decision = _decide(_job(moves=[MOVING]), PodBuilder("cnn").bound().phase("Succeeded"))
    assert decision.status["phase"] == "Succeeded" and decision.delete_pods == ()


@pytest.mark.parametrize("broken", [{"to": "nowhere"}, {"attempt": "zero"}, {"state": "Moved"}])
def test_an_unreadable_or_finished_entry_is_no_move_in_progress(broken: dict) -> None:
    running = [pods.view(PodBuilder("cnn").bound().phase("Running").obj())]
    assert migration.in_progress(dljob.parse(_job()), {"moves": [{**MOVING, **broken}]}, running) is None


def test_status_is_no_control_channel_an_entry_horus_could_not_have_written_moves_nothing() -> None:
    """Anyone who may patch dljobs/status could write `status.moves`; such an entry is ignored unless the
    spec allows moving, it moves as many GPUs as the job asks, and names the attempt of the job's pod."""
    running = PodBuilder("cnn").bound().phase("Running")
    not_allowed = DLJobBuilder.stored("cnn").status(moves=[MOVING]).obj()
    four_gpus = _job(moves=[{**MOVING, "to": "gpu-node-1/0,1,2,3"}])
    future_attempt = _job(moves=[{**MOVING, "attempt": 7}])
    for body in (not_allowed, four_gpus, future_attempt):
        decision = _decide(body, running)
        assert (decision.delete_pods, decision.place_attempt, decision.moving) == ((), None, None)
        assert decision.status["phase"] == "Running", "the running pod goes on"
    # With no pod left, an entry for an attempt older than one of the job's pods is no move either.
    failed_later = PodBuilder("cnn", attempt=2).bound().phase("Failed")
    assert _decide(_job(moves=[MOVING]), failed_later).move_to is None


def test_what_the_planner_reads_from_status() -> None:
    body = DLJobBuilder.stored("cnn").spec(migration={"allowed": True}, totalSteps=1000).obj()
    status = {
        "observed": {"slowdown": 2.0, "stateSince": "2026-12-02T09:00:00Z"},
        "estimatedCompletionTime": "2026-12-02T11:10:00Z",
        "moves": [{**MOVING, "state": "Moved"}],
    }
    pod = pods.view(PodBuilder("cnn", attempt=1).bound().phase("Running").obj())
    known = migration.mobility(dljob.parse(body), status, pod, NOW)
    assert (known.allowed, known.grace_period_s, known.max_slowdown) == (True, 30.0, 2.0)
    assert known.observed_slowdown == 2.0
    assert known.observed_since == datetime(2026, 12, 2, 9, tzinfo=UTC).timestamp()
    assert known.remaining_s == pytest.approx(1800.0)  # an hour to go at 2x: half an hour alone
    assert (known.moves, known.last_move_at) == (1, datetime(2026, 12, 2, 10, tzinfo=UTC).timestamp())
    unknown = migration.mobility(dljob.parse(_job()), {}, pod, NOW)
    assert (unknown.observed_slowdown, unknown.remaining_s, unknown.moves) == (None, None, 0)
