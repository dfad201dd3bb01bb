"""Whom kube-scheduler's refusal of a Horus pod blames (jobs/refusals.py), and the PersistentVolumeClaims
a template names (jobs/volumes.py). The messages are kube-scheduler's own wording (k8s.io/kubernetes
v1.37 pkg/scheduler: FitError.Error and the plugins' reasons; older wordings where they differ): a Horus
pod is pinned to one node, so every other node refuses it for Horus's node selector too."""

from __future__ import annotations

import pytest

from horus_operator.api import dljob
from horus_operator.operator.jobs import refusals, volumes
from horus_operator.operator.jobs.refusals import Blame
from horus_operator.testing.builders import DLJobBuilder

PREEMPTION = " preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
OTHERS = "3 node(s) didn't match Pod's node affinity/selector"  # Horus's nodeSelector, on the other nodes


# Reasons the Filter plugins give one node, each with whom it blames
ON_THE_NODE = {
    "Insufficient cpu": Blame.ASKED,  # what the pod requests: its owner's to set (issue 44, round 4)
    "Insufficient memory": Blame.ASKED,
    "Too many pods": Blame.NODE,
    "node(s) had untolerated taint(s)": Blame.NODE,  # v1.37
    "node(s) had untolerated taint {gpu: broken, team: a}": Blame.NODE,  # before
    "node(s) were unschedulable": Blame.NODE,
    "node(s) had unknown conditions": Blame.NODE,
    "cannot allocate all claims": Blame.NODE,  # DRA binding: the claim's GPU is not free after all
    "node(s) didn't match pod topology spread constraints": Blame.JOB,
    "node(s) didn't match pod topology spread constraints (missing required label)": Blame.JOB,
    "node(s) didn't match PersistentVolume's node affinity": Blame.JOB,
    "node(s) had volume node affinity conflict": Blame.JOB,  # before v1.24
    "node(s) didn't find available persistent volumes to bind": Blame.JOB,
    "node(s) had no available volume zone": Blame.JOB,
    "node(s) didn't match pod affinity rules": Blame.JOB,
    "node(s) didn't match pod anti-affinity rules": Blame.JOB,
    "node(s) didn't have free ports for the requested pod ports": Blame.UNKNOWN,
    "node(s) didn't satisfy existing pods anti-affinity rules": Blame.UNKNOWN,  # of other pods' making
}
# Reasons a PreFilter plugin gives before any node is tried (the message then has no counts)
BEFORE_ANY_NODE = (
    'persistentvolumeclaim "data" not found',
    'persistentvolumeclaim "data" is being deleted',
    "pod has unbound immediate PersistentVolumeClaims",
    'waiting for ephemeral volume controller to create the persistentvolumeclaim "job-0-scratch"',
)


@pytest.mark.parametrize(("reason", "blame"), ON_THE_NODE.items())
def test_a_reason_of_the_chosen_node_blames_the_node_the_job_or_neither(reason: str, blame: Blame) -> None:
    judged = refusals.judge(f"0/4 nodes are available: 1 {reason}, {OTHERS}.{PREEMPTION}")
    assert (judged.blame, judged.cause) == (blame, reason)


@pytest.mark.parametrize("reason", BEFORE_ANY_NODE)
def test_a_claim_refused_before_any_node_blames_the_job(reason: str) -> None:
    judged = refusals.judge(f"0/4 nodes are available: {reason}.{PREEMPTION}")
    assert (judged.blame, judged.cause, judged.plugin) == (Blame.JOB, reason, "VolumeBinding")


def test_the_whole_message_of_a_node_full_of_cpu() -> None:
    message = (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert refusals.judge(message) == refusals.Refusal(Blame.ASKED, "Insufficient cpu", "NodeResourcesFit")


def test_a_node_that_no_longer_matches_the_pods_node_selector_is_passed_over_by_the_job() -> None:
    # Its labels changed, or the pod's owner gave it an affinity: the job's to avoid, not everyone's.
    judged = refusals.judge(
        f"0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.{PREEMPTION}"
    )
    assert judged.blame == Blame.ASKED


def test_the_taint_wording_before_v1_25_blames_the_node() -> None:
    message = (
        "0/4 nodes are available: 1 node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't "
        f"tolerate, {OTHERS}."
    )
    assert refusals.judge(message).blame == Blame.NODE


@pytest.mark.parametrize("message", ["", "the scheduler said something else"])
def test_no_word_of_kube_scheduler_blames_neither(message: str) -> None:
    assert refusals.judge(message) == refusals.Refusal(Blame.UNKNOWN)


def test_a_pod_level_reason_outweighs_the_nodes_own() -> None:
    """Other nodes refuse for their taints or for being cordoned too: that says nothing of this pod."""
    message = (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, "
        "2 node(s) didn't match pod topology spread constraints."
    )
    assert refusals.judge(message).blame == Blame.JOB


def test_reasons_drop_the_counts_and_what_preemption_found() -> None:
    message = f"0/4 nodes are available: 1 Insufficient cpu, {OTHERS}.{PREEMPTION}"
    assert refusals.reasons(message) == [
        "Insufficient cpu",
        "node(s) didn't match Pod's node affinity/selector",
    ]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        # kube-scheduler v1.37 after a PreFilter refusal: its PostFilter adds "not found"
        (
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
            "pod has unbound immediate PersistentVolumeClaims",
        ),
        (
            f'0/3 nodes are available: persistentvolumeclaim "data.v2" not found.{PREEMPTION}',
            'persistentvolumeclaim "data.v2" not found',
        ),
    ],
)
def test_reasons_end_with_their_sentence(message: str, reason: str) -> None:
    assert refusals.reasons(message) == [reason]


def test_a_node_is_a_suspect_until_it_refuses_a_second_namespaces_pod() -> None:
    suspects = refusals.NodeSuspects(window_s=120)
    assert not suspects.refused("n0", "team-a/one", now=0)
    assert not suspects.refused("n0", "team-a/one", now=30)  # the same job again proves nothing of the node
    assert not suspects.refused("n0", "team-a/twin", now=35)  # nor one tenant's second job
    assert not suspects.refused("n1", "team-b/two", now=40)  # another node
    assert suspects.refused("n0", "team-b/two", now=60)
    assert not suspects.refused("n1", "team-c/three", now=200)  # team-b/two's refusal there is too old


def test_a_job_passes_over_the_nodes_that_refused_it_for_the_window() -> None:
    suspects = refusals.NodeSuspects(window_s=120)
    suspects.refused("n0", "team-a/one", now=0)
    suspects.refused("n1", "team-a/one", now=60)
    assert suspects.avoided_by("team-a/one", now=100) == {"n0", "n1"}
    assert suspects.avoided_by("team-a/two", now=100) == frozenset()
    assert suspects.avoided_by("team-a/one", now=150) == {"n1"}
    suspects.forget("team-a/one")
    assert suspects.avoided_by("team-a/one", now=150) == frozenset()
    assert not suspects.refused("n1", "team-b/two", now=160)  # a job gone blames no node


def test_a_recorded_refusal_counts_for_its_generation_and_for_another_pod() -> None:
    first = refusals.Noted("job-0", "n0", "pod has unbound immediate PersistentVolumeClaims")
    state, reason, message = first.condition("VolumeBinding")
    condition = {"type": refusals.CONDITION, "status": state, "reason": reason, "message": message}
    recorded = {"conditions": [{**condition, "observedGeneration": 1}]}
    assert refusals.noted(recorded, generation=1) == first
    assert refusals.noted(recorded, generation=2) is None  # a new spec may have fixed it
    assert not refusals.is_repeat(first, first)  # the same pod, decided again
    assert refusals.is_repeat(refusals.Noted("job-1", "n1", first.cause), first)
    assert not refusals.is_repeat(
        refusals.Noted("job-1", "n1", "node(s) didn't match pod anti-affinity rules"), first
    )


def test_a_claim_named_after_each_pod_is_the_same_reason_for_every_pod() -> None:
    # A generic ephemeral volume's claim is "<pod>-<volume>": each new pod is refused naming its own.
    cause = 'waiting for ephemeral volume controller to create the persistentvolumeclaim "{}-scratch"'
    first = refusals.Noted("job-0", "n0", cause.format("job-0"))
    assert refusals.is_repeat(refusals.Noted("job-1", "n1", cause.format("job-1")), first)


def _job(*volume_list: dict) -> dljob.JobSpec:
    template = {"spec": {"containers": [{"name": "train"}], "volumes": list(volume_list)}}
    return dljob.parse(DLJobBuilder.stored("cnn").spec(template=template).obj())


def test_a_missing_claim_is_named_by_its_field() -> None:
    job = _job(
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
        {"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
    )
    exists = {("team-a", "imagenet")}
    assert volumes.missing_claim(job, lambda namespace, name: (namespace, name) in exists) is None
    missing = volumes.missing_claim(job, lambda namespace, name: False)
    assert missing is not None
    assert str(missing) == (
        "spec.template.spec.volumes[1].persistentVolumeClaim.claimName='imagenet': "
        "no PersistentVolumeClaim imagenet in namespace team-a"
    )


def test_a_template_without_volumes_or_of_odd_shape_names_no_claim() -> None:
    assert volumes.missing_claim(_job(), lambda namespace, name: False) is None
    odd = dljob.parse(
        DLJobBuilder.stored("cnn")
        .spec(template={"spec": {"volumes": ["x", {"persistentVolumeClaim": 3}]}})
        .obj()
    )
    assert volumes.missing_claim(odd, lambda namespace, name: False) is None
