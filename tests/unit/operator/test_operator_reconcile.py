"""reconcile.decide: the status and next action of one DLJob from its pods, table by table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from operator_builders import PodBuilder

from horus_operator.api import dljob
from horus_operator.api.dljob import InvalidJob
from horus_operator.operator.jobs import pods, reconcile
from horus_operator.testing.builders import DLJobBuilder

NOW = datetime(2026, 12, 2, 10, 10, tzinfo=UTC)
NODES = ("gpu-node-0", "gpu-node-1")


def _decide(job_body: dict, *pod_builders: PodBuilder, **context: object) -> reconcile.Decision:
    ctx = reconcile.Context(now=NOW, nodes=context.pop("nodes", NODES), **context)  # type: ignore[arg-type]
    views = [pods.view(b.obj()) for b in pod_builders]
    return reconcile.decide(dljob.parse(job_body), job_body.get("status") or {}, views, ctx)


def _condition(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_a_new_job_is_queued_for_its_first_attempt() -> None:
    decision = _decide(DLJobBuilder.stored("cnn").obj(), waiting_message="waiting: no GPU free")
    assert decision.place_attempt == 0
    assert decision.status["phase"] == "Queued"
    assert decision.status["message"] == "waiting: no GPU free"
    assert _condition(decision.status, "Scheduled")["status"] == "False"


def test_pod_phases_map_to_job_phases_and_conditions() -> None:
    cases = {
        "Pending": ("Scheduled", {"Scheduled": "True"}),
        "Running": ("Running", {"Scheduled": "True", "Running": "True"}),
        "Succeeded": ("Succeeded", {"Complete": "True", "Running": "False"}),
    }
    for pod_phase, (job_phase, conditions) in cases.items():
        decision = _decide(DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn").bound().phase(pod_phase))
        assert decision.place_attempt is None
        assert decision.status["phase"] == job_phase, pod_phase
        for kind, state in conditions.items():
            assert _condition(decision.status, kind)["status"] == state, (pod_phase, kind)


def test_status_carries_the_placement_from_the_pod() -> None:
    status = _decide(
        DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn").on("gpu-node-1", 2, 3).bound()
    ).status
    assert (status["node"], status["gpuList"]) == ("gpu-node-1", "2,3")
    assert status["gpus"] == [{"index": 2}, {"index": 3}]
    assert status["predicted"]["slowdown"] == 1.1


def test_a_failed_pod_is_retried_with_the_next_attempt_until_the_backoff_limit() -> None:
    job = DLJobBuilder.stored("cnn").spec(backoffLimit=1).obj()
    retry = _decide(job, PodBuilder("cnn", 0).bound().phase("Failed"))
    assert (retry.status["phase"], retry.place_attempt) == ("Queued", 1)
    exhausted = _decide(job, PodBuilder("cnn", 0).phase("Failed"), PodBuilder("cnn", 1).phase("Failed"))
    assert exhausted.place_attempt is None
    assert exhausted.status["phase"] == "Failed"
    assert _condition(exhausted.status, "Failed")["reason"] == "BackoffLimitExceeded"


def test_an_earlier_success_wins_over_later_attempts() -> None:
    decision = _decide(DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn", 0).phase("Succeeded"))
    assert decision.status["phase"] == "Succeeded"
    assert decision.status["completionTime"] == "2026-12-02T10:10:00Z"


def test_finished_jobs_are_left_alone() -> None:
    ended = _decide(DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn").bound().phase("Succeeded")).status
    job = DLJobBuilder.stored("cnn").status(**ended).obj()
    decision = _decide(job)
    assert decision.place_attempt is None
    assert decision.status == job["status"]


def test_an_invalid_spec_fails_and_a_new_generation_is_judged_again() -> None:
    invalid = InvalidJob("spec.model.architecture", "nosuchnet", "unknown model")
    failed = _decide(DLJobBuilder.stored("cnn").obj(), verdict=invalid)
    assert failed.status["phase"] == "Failed"
    condition = _condition(failed.status, "Failed")
    assert condition["reason"] == "InvalidSpec"
    assert "spec.model.architecture='nosuchnet'" in condition["message"]
    fixed = DLJobBuilder.stored("cnn").generation(2).status(**failed.status).obj()
    assert _decide(fixed).place_attempt == 0


def test_unsatisfiable_jobs_fail_with_the_field_named() -> None:
    problem = InvalidJob("spec.gpus", 16, "no node has more than 8 GPUs")
    decision = _decide(DLJobBuilder.stored("big").spec(gpus=16).obj(), unsatisfiable=problem)
    condition = _condition(decision.status, "Failed")
    assert (condition["reason"], decision.place_attempt) == ("Unsatisfiable", None)
    assert "spec.gpus=16" in condition["message"]


def test_a_pod_on_a_vanished_node_is_deleted_and_the_job_re_placed() -> None:
    decision = _decide(
        DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn").on("gone-node", 0).bound().phase("Running")
    )
    assert decision.delete_pods == ("cnn-0",)
    assert decision.place_attempt == 1
    assert "gone-node is gone" in decision.delete_reason
    assert decision.avoid_node == ""


FULL_OF_CPU = (
    "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector."
)
UNBOUND = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."


def test_a_pod_unschedulable_past_the_grace_period_is_re_placed() -> None:
    recent = PodBuilder("cnn").unschedulable_since("2026-12-02T10:09:50Z", FULL_OF_CPU)
    assert _decide(DLJobBuilder.stored("cnn").obj(), recent).delete_pods == ()
    stale = PodBuilder("cnn").unschedulable_since("2026-12-02T10:00:00Z", FULL_OF_CPU)
    decision = _decide(DLJobBuilder.stored("cnn").obj(), stale, unschedulable_grace=timedelta(seconds=30))
    assert (decision.delete_pods, decision.place_attempt) == (("cnn-0",), 1)
    # CPU is what the pod asks as much as what the node has: the job alone passes the node over
    assert (decision.avoid_node, decision.suspect_node, decision.passed_node) == ("", "", "gpu-node-0")
    assert decision.status["message"] == (
        "re-placing: pod cnn-0 unschedulable on gpu-node-0 for over 30s: Insufficient cpu"
    )


def test_a_refusal_of_unknown_blame_makes_the_job_alone_pass_the_node_over() -> None:
    stale = PodBuilder("cnn").unschedulable_since("2026-12-02T10:00:00Z")  # kube-scheduler said nothing
    decision = _decide(DLJobBuilder.stored("cnn").obj(), stale)
    assert (decision.delete_pods, decision.place_attempt) == (("cnn-0",), 1)
    assert (decision.avoid_node, decision.suspect_node, decision.passed_node) == ("", "", "gpu-node-0")


def test_a_refusal_for_the_nodes_own_reasons_makes_it_a_suspect() -> None:
    tainted = (
        "0/2 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 node(s) didn't match Pod's node affinity/selector."
    )
    stale = PodBuilder("cnn").unschedulable_since("2026-12-02T10:00:00Z", tainted)
    decision = _decide(DLJobBuilder.stored("cnn").obj(), stale)
    assert (decision.avoid_node, decision.suspect_node, decision.passed_node) == ("", "gpu-node-0", "")


def _refused(attempt: int, node: str, message: str = UNBOUND) -> PodBuilder:
    return PodBuilder("cnn", attempt).on(node, 0).unschedulable_since("2026-12-02T10:00:00Z", message)


def test_a_pod_level_refusal_cools_no_node_and_is_recorded() -> None:
    decision = _decide(DLJobBuilder.stored("cnn").obj(), _refused(0, "gpu-node-0"))
    assert (decision.delete_pods, decision.place_attempt, decision.store_first) == (("cnn-0",), 1, True)
    assert (decision.avoid_node, decision.suspect_node) == ("", "")
    noted = _condition(decision.status, "Unschedulable")
    assert (noted["status"], noted["reason"]) == ("True", "VolumeBinding")
    assert noted["message"] == "pod cnn-0 on gpu-node-0: pod has unbound immediate PersistentVolumeClaims"
    assert decision.status["message"].endswith(
        "for over 30s: pod has unbound immediate PersistentVolumeClaims"
    )


def _after_first_refusal(**spec: object) -> dict:
    first = _decide(DLJobBuilder.stored("cnn").obj(), _refused(0, "gpu-node-0")).status
    return DLJobBuilder.stored("cnn").spec(**spec).status(**first).obj()


def test_a_second_pod_refused_for_the_same_pod_level_reason_fails_the_job() -> None:
    job = _after_first_refusal()
    decision = _decide(job, PodBuilder("cnn", 0).deleting(), _refused(1, "gpu-node-1"))
    assert decision.status["phase"] == "Failed"
    assert (decision.place_attempt, decision.avoid_node, decision.suspect_node) == (None, "", "")
    assert _condition(decision.status, "Failed")["reason"] == "Unschedulable"
    assert decision.status["message"] == (
        "kube-scheduler refused pod cnn-1 on gpu-node-1 for the same reason as pod cnn-0 on gpu-node-0, "
        "which no other node changes: pod has unbound immediate PersistentVolumeClaims"
    )
    # Its pod goes once the failure is stored: until then a decision still sees why the job failed.
    assert (decision.delete_pods, decision.delete_grace_s, decision.store_first) == (("cnn-1",), 0, True)
    failed = DLJobBuilder.stored("cnn").status(**decision.status).obj()
    final = _decide(failed, _refused(1, "gpu-node-1"))  # stored, but the operator stopped before deleting
    assert (final.delete_pods, final.delete_grace_s, final.place_attempt) == (("cnn-1",), 0, None)
    assert final.status == failed["status"]


def test_a_refusal_counts_again_only_for_another_pod_the_same_generation_and_the_same_reason() -> None:
    job = _after_first_refusal()
    same_pod = _decide(job, _refused(0, "gpu-node-0"))
    other_reason = _decide(
        job,
        PodBuilder("cnn", 0).deleting(),
        _refused(1, "gpu-node-1", "0/2 nodes are available: 1 node(s) didn't match pod anti-affinity rules."),
    )
    edited = DLJobBuilder.stored("cnn").generation(2).status(**job["status"]).obj()
    new_spec = _decide(edited, PodBuilder("cnn", 0).deleting(), _refused(1, "gpu-node-1"))
    assert [d.status["phase"] for d in (same_pod, other_reason, new_spec)] == ["Queued"] * 3


def test_a_pod_kube_scheduler_takes_clears_the_recorded_refusal() -> None:
    job = _after_first_refusal()
    running = _decide(
        job,
        PodBuilder("cnn", 0).deleting(),
        PodBuilder("cnn", 1).on("gpu-node-1", 0).bound().phase("Running"),
    )
    assert _condition(running.status, "Unschedulable")["status"] == "False"
    again = DLJobBuilder.stored("cnn").status(**running.status).obj()
    assert (
        _decide(again, PodBuilder("cnn", 1).deleting(), _refused(2, "gpu-node-0")).status["phase"] == "Queued"
    )


def test_a_job_naming_a_missing_claim_waits_without_a_pod_naming_the_field() -> None:
    missing = InvalidJob(
        "spec.template.spec.volumes[0].persistentVolumeClaim.claimName",
        "data",
        "no PersistentVolumeClaim data in namespace team-a",
    )
    new = _decide(DLJobBuilder.stored("cnn").obj(), missing_volume=missing)
    assert (new.status["phase"], new.place_attempt) == ("Queued", None)
    assert new.status["message"] == (
        "waiting: spec.template.spec.volumes[0].persistentVolumeClaim.claimName='data': "
        "no PersistentVolumeClaim data in namespace team-a"
    )
    refused = _decide(DLJobBuilder.stored("cnn").obj(), _refused(0, "gpu-node-0"), missing_volume=missing)
    assert (refused.delete_pods, refused.place_attempt, refused.avoid_node) == (("cnn-0",), None, "")


def test_attempt_numbers_skip_pods_still_being_deleted() -> None:
    decision = _decide(DLJobBuilder.stored("cnn").obj(), PodBuilder("cnn", 0).deleting())
    assert decision.place_attempt == 1


def test_deciding_twice_changes_nothing() -> None:
    job = DLJobBuilder.stored("cnn").obj()
    first = _decide(job, PodBuilder("cnn").bound().phase("Running"))
    again = _decide(
        DLJobBuilder.stored("cnn").status(**first.status).obj(), PodBuilder("cnn").bound().phase("Running")
    )
    assert again.status == first.status


def test_condition_transition_times_only_move_when_the_status_changes() -> None:
    earlier = NOW - timedelta(minutes=5)
    scheduled = reconcile.decide(
        dljob.parse(DLJobBuilder.stored("cnn").obj()),
        {},
        [pods.view(PodBuilder("cnn").bound().obj())],
        reconcile.Context(now=earlier, nodes=NODES),
    ).status
    running = _decide(
        DLJobBuilder.stored("cnn").status(**scheduled).obj(), PodBuilder("cnn").bound().phase("Running")
    )
    assert _condition(running.status, "Scheduled")["lastTransitionTime"] == "2026-12-02T10:05:00Z"
    assert _condition(running.status, "Running")["lastTransitionTime"] == "2026-12-02T10:10:00Z"


def test_fields_written_by_others_are_carried_over() -> None:
    job = DLJobBuilder.stored("cnn").status(observed={"utilization": 0.7}).obj()
    decision = _decide(job, PodBuilder("cnn").bound(), extra={"observed": {"utilization": 0.7}})
    assert decision.status["observed"] == {"utilization": 0.7}


def test_a_pod_on_a_node_not_ready_past_the_grace_period_is_re_placed_and_says_so_before() -> None:
    running = PodBuilder("cnn").on("gpu-node-1", 0).bound().phase("Running")
    grace = timedelta(seconds=60)

    within = _decide(
        DLJobBuilder.stored("cnn").obj(),
        running,
        not_ready_since={"gpu-node-1": NOW - timedelta(seconds=50)},
        not_ready_grace=grace,
    )
    past = _decide(
        DLJobBuilder.stored("cnn").obj(),
        running,
        not_ready_since={"gpu-node-1": NOW - timedelta(seconds=70)},
        not_ready_grace=grace,
    )

    assert (within.status["phase"], within.place_attempt, within.delete_pods) == ("Running", None, ())
    assert within.status["message"].endswith(
        "; node gpu-node-1 NotReady since 2026-12-02T10:09:10Z: re-placed if still so 60s after"
    )
    assert (past.status["phase"], past.place_attempt, past.delete_pods) == ("Queued", 1, ("cnn-0",))
    assert past.delete_reason == "node gpu-node-1 NotReady for over 60s"
    assert past.avoid_node == "gpu-node-1"


def test_a_not_ready_node_leaves_pods_elsewhere_alone() -> None:
    elsewhere = PodBuilder("cnn").on("gpu-node-0", 0).bound().phase("Running")

    decision = _decide(
        DLJobBuilder.stored("cnn").obj(),
        elsewhere,
        not_ready_since={"gpu-node-1": NOW - timedelta(hours=1)},
    )

    assert (decision.delete_pods, decision.status["message"]) == ((), "pod cnn-0 on gpu-node-0 GPU 0 running")


def _running_with_steps(predicted: dict, observed: dict | None = None) -> dict:
    job = DLJobBuilder.stored("cnn").spec(totalSteps=1000).obj()
    if observed is not None:
        job["status"] = {"observed": observed}
    pod = PodBuilder("cnn").bound().phase("Running").predicted(predicted).started("2026-12-02T10:00:00Z")
    return _decide(job, pod).status


def test_a_running_job_with_total_steps_has_an_estimated_completion_time() -> None:
    # 1000 steps at 0.2 s alone, slowed 1.5x: 300 s after its start.
    predicted = {"utilization": 0.6, "memoryMiB": 4000, "slowdown": 1.5, "stepSeconds": 0.2}
    assert _running_with_steps(predicted)["estimatedCompletionTime"] == "2026-12-02T10:05:00Z"
    # Once the job reports its rate (4 steps/s), that rate counts: 250 s.
    observed = _running_with_steps(predicted, {"stepsPerSecond": 4.0})
    assert observed["estimatedCompletionTime"] == "2026-12-02T10:04:10Z"


def test_no_estimate_without_total_steps_or_any_rate() -> None:
    no_rate = _running_with_steps({"utilization": 0.6, "memoryMiB": 4000, "slowdown": 1.1})
    assert "estimatedCompletionTime" not in no_rate
    no_steps = reconcile.estimated_completion(None, NOW, {"stepSeconds": 0.2}, {})
    assert no_steps is None
