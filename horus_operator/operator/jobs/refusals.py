"""Why kube-scheduler refused a Horus pod, and whom that blames: the node, or the job.

Pure. A pod Horus made is pinned to one node (`nodeSelector: kubernetes.io/hostname`), so when it stays
unschedulable past its grace period the operator deletes it and places the job again. Whether the node
is then cooled (skipped for every job for a while, `placement/cycle.py` `Cooldowns`) depends on what
kube-scheduler said in the pod's PodScheduled=False condition, e.g. "0/4 nodes are available: 1 Insufficient
cpu, 3 node(s) didn't match Pod's node affinity/selector. preemption: …":

- the pod's own making (a PersistentVolumeClaim missing, unbound or bound elsewhere, topology spread or
  pod (anti-)affinity constraints): no node is cooled, for any other job would fit there; the job is
  placed again, and refused a second time for the same reason it fails (`is_repeat`);
- what the pod asks against what the node has (too little CPU or memory for its requests, its node
  affinity), and any reason this table does not know: the job passes the node over for a while
  (`NodeSuspects.avoided_by`); nobody else is affected. A pod's owner sets its requests and affinity: a
  pod asking nearly all of a node's CPU is refused beside any other pod, and its owner — holding one
  namespace or several — must not be able to cool node after node for everyone (issue 44, rounds 3
  and 4). A node whose CPU is truly full costs each job one grace period there.
- the node's own reasons, whatever a pod asks (an untolerated taint, cordoned, unknown conditions, too
  many pods, a DRA claim of Horus's it cannot allocate): the job passes it over, and the node is cooled
  for every job once pods of two namespaces were refused there (`NodeSuspects`).

The other nodes always show up too, refused by Horus's own node selector (or their taints, or cordoned):
node-level noise that never outweighs a pod-level reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Blame(StrEnum):
    NODE = "node"  # the node refuses whatever a pod asks (taints, cordoned): cool it once two tenants met it
    ASKED = "asked"  # what the pod asks meets what the node has (CPU, memory, affinity): the job passes it
    JOB = "job"  # the pod's own making: no node would take it, and no node is to blame
    UNKNOWN = "unknown"  # the job passes the node over; nobody else is affected


# kube-scheduler's reasons (k8s.io/kubernetes pkg/scheduler/framework/plugins, v1.37 and older wordings),
# each as the start of one reason of its message, with the plugin that gives it.
REASONS: tuple[tuple[str, Blame, str], ...] = (
    ("Insufficient ", Blame.ASKED, "NodeResourcesFit"),
    ("Too many pods", Blame.NODE, "NodeResourcesFit"),
    ("node(s) had untolerated taint", Blame.NODE, "TaintToleration"),
    ("node(s) had taint", Blame.NODE, "TaintToleration"),
    ("that the pod didn't tolerate", Blame.NODE, "TaintToleration"),  # before v1.25: "had taint {…}, that…"
    ("node(s) didn't match Pod's node affinity/selector", Blame.ASKED, "NodeAffinity"),
    ("node(s) didn't match scheduler-enforced node affinity", Blame.ASKED, "NodeAffinity"),
    ("node(s) were unschedulable", Blame.NODE, "NodeUnschedulable"),
    ("node(s) had unknown conditions", Blame.NODE, "NodeUnschedulable"),
    # DRA binding: the claim names a GPU of this node that Horus counted free and is not
    ("cannot allocate all claims", Blame.NODE, "DynamicResources"),
    ("resourceclaim not available on the node", Blame.NODE, "DynamicResources"),
    ("persistentvolumeclaim ", Blame.JOB, "VolumeBinding"),  # "… \"x\" not found", "… is being deleted"
    ("waiting for ephemeral volume controller", Blame.JOB, "VolumeBinding"),
    ("pod has unbound immediate PersistentVolumeClaims", Blame.JOB, "VolumeBinding"),
    ("node(s) didn't find available persistent volumes to bind", Blame.JOB, "VolumeBinding"),
    ("node(s) didn't match PersistentVolume's node affinity", Blame.JOB, "VolumeBinding"),
    ("node(s) had volume node affinity conflict", Blame.JOB, "VolumeBinding"),
    ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)", Blame.JOB, "VolumeBinding"),
    ("node(s) had no available volume zone", Blame.JOB, "VolumeZone"),
    (
        "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod",
        Blame.JOB,
        "VolumeRestrictions",
    ),
    ("node(s) didn't match pod topology spread constraints", Blame.JOB, "PodTopologySpread"),
    ("node(s) didn't match pod affinity rules", Blame.JOB, "InterPodAffinity"),
    ("node(s) didn't match pod anti-affinity rules", Blame.JOB, "InterPodAffinity"),
)
CONDITION = "Unschedulable"  # the DLJob condition that records a pod-level refusal (`noted`)
_SEPARATOR = re.compile(r", (?![^{]*})")  # between reasons, not inside a taint's "{key: value, …}"
_COUNT = re.compile(r"^\d+ ")  # "3 node(s) …": how many nodes said it
_SENTENCE_END = re.compile(r"\.(?:\s|$)")  # a claim's name may hold a dot, never one before a space
_NOTED = re.compile(r"^pod (\S+) on (\S*): (.*)$", re.DOTALL)
_QUOTED = re.compile(r'"[^"]*"')


@dataclass(frozen=True)
class Refusal:
    blame: Blame
    # the reason blamed: the first pod-level one, else the first unknown one, else a node-level one
    cause: str = ""
    plugin: str = ""  # the kube-scheduler plugin that gave `cause` ("" when unknown)


def judge(message: str) -> Refusal:
    """Whom kube-scheduler's `message` blames. One pod-level reason blames the job; else one reason this
    table does not know leaves it unknown; else one of what the pod asks against what the node has;
    else (only the node's own reasons) the node. No message: unknown."""
    # Horus's own node selector refuses every other node: a node's other reasons say more about it
    judged = [(r, *_known(r)) for r in reasons(message)]
    judged = [r for r in judged if r[2] != "NodeAffinity"] or judged
    for blame in (Blame.JOB, Blame.UNKNOWN, Blame.ASKED, Blame.NODE):
        first = next((r for r in judged if r[1] == blame), None)
        if first is not None:
            return Refusal(blame, first[0], first[2])
    return Refusal(Blame.UNKNOWN)


def reasons(message: str) -> list[str]:
    """The reasons of a scheduler message, "0/X nodes are available: <reasons>. <what preemption found>",
    without how many nodes gave each. What preemption found only repeats that preempting would not help
    (or, from kube-scheduler v1.37 after a PreFilter refusal, says "not found")."""
    _, colon, text = message.partition("nodes are available:")
    if not colon:
        return []
    text = _SENTENCE_END.split(text.strip(), 1)[0]
    found = (_COUNT.sub("", part.strip()) for part in _SEPARATOR.split(text))
    return [reason for reason in found if reason]


def _known(reason: str) -> tuple[Blame, str]:
    for start, blame, plugin in REASONS:
        if reason.startswith(start):
            return blame, plugin
    return Blame.UNKNOWN, ""


@dataclass(frozen=True)
class Noted:
    """A pod-level refusal the job's status records (`CONDITION`), so that it outlives the operator."""

    pod: str
    node: str
    cause: str

    def condition(self, plugin: str) -> tuple[str, str, str]:
        """The condition's (status, reason, message)."""
        return "True", plugin or "PodLevel", f"pod {self.pod} on {self.node}: {self.cause}"


def settled(status: Mapping[str, Any], where: str) -> dict[str, tuple[str, str, str]]:
    """The condition cleared once kube-scheduler has taken a later pod of the job (`where`): refusals
    count only in a row. Nothing where no refusal is recorded."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == CONDITION and condition.get("status") == "True":
            return {CONDITION: ("False", "PodScheduled", where)}
    return {}


def noted(status: Mapping[str, Any], generation: int) -> Noted | None:
    """The pod-level refusal recorded in `status` for this generation of the job (a new spec may have fixed
    what was refused), None where there is none."""
    for condition in status.get("conditions") or []:
        if condition.get("type") != CONDITION or condition.get("status") != "True":
            continue
        if condition.get("observedGeneration") != generation:
            return None
        found = _NOTED.match(str(condition.get("message") or ""))
        return Noted(*found.groups()) if found else None
    return None


def is_repeat(refused: Noted, before: Noted) -> bool:
    """Whether `refused` repeats an earlier pod's refusal for the same reason: no node is to blame, and
    trying a third would walk the cluster. Names kube-scheduler quotes are left out of the comparison:
    a generic ephemeral volume's claim is named after its pod (`"<pod>-<volume>"`), new for each pod."""
    return before.pod != refused.pod and _unnamed(before.cause) == _unnamed(refused.cause)


def _unnamed(cause: str) -> str:
    return _QUOTED.sub('"…"', cause)


def repeated(refused: Noted, before: Noted) -> str:
    """The failure's message, one sentence."""
    return (
        f"kube-scheduler refused pod {refused.pod} on {refused.node} for the same reason as pod {before.pod} "
        f"on {before.node}, which no other node changes: {refused.cause}"
    )


class NodeSuspects:
    """The nodes that refused pods, and whose.

    The job whose pod a node refused passes that node over for `window_s` seconds (`avoided_by`, the
    request's `avoid_nodes`); everyone else still may go there. A node is to blame for all only for its
    own reasons (`Blame.NODE`: taints, cordoned; never what a pod asks, which its owner sets) and once it
    refused pods of two namespaces within the window for them. In memory: a restart forgets them, and a
    job is then refused once more before it passes a node over."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._refused: dict[str, dict[str, float]] = {}  # node -> job key -> when its pod was last refused
        self._nodes_of: dict[str, dict[str, float]] = {}  # job key -> node -> when its pod was last refused

    def refused(self, node: str, job: str, now: float, *, blames_node: bool = True) -> bool:
        """Note that `node` refused `job`'s pod at `now`; whether, for a reason that `blames_node`, it
        refused another namespace's lately. Other refusals only make the job pass the node over."""
        if not blames_node:
            self._nodes_of.setdefault(job, {})[node] = now
            return False
        jobs = self._refused.setdefault(node, {})
        for key in [key for key, when in jobs.items() if now - when >= self._window_s]:
            del jobs[key]
        jobs[job] = now
        self._nodes_of.setdefault(job, {})[node] = now
        return len({_namespace(key) for key in jobs}) >= 2

    def avoided_by(self, job: str, now: float) -> frozenset[str]:
        """The nodes that refused `job`'s pods within the window."""
        nodes = self._nodes_of.get(job)
        if not nodes:
            return frozenset()
        for node in [node for node, when in nodes.items() if now - when >= self._window_s]:
            del nodes[node]
        return frozenset(nodes)

    def forget(self, job: str) -> None:
        """`job` is gone: its refusals blame no node any more."""
        for node in self._nodes_of.pop(job, {}):
            self._refused.get(node, {}).pop(job, None)


def _namespace(job: str) -> str:
    return job.partition("/")[0]
