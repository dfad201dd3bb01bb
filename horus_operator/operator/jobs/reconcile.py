"""Level-triggered decisions for one DLJob: its desired status and next action, from its pods alone.

Pure. Inputs are what the API server shows (the DLJob, its pods, which nodes exist) plus the scheduler's
latest word on a waiting job; the output says what the status should be and whether the job needs a pod
placed or a stuck pod removed. Running it twice on the same inputs gives the same answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.operator.dra import claims
from horus_operator.operator.dra.claims import ClaimId, ClaimView
from horus_operator.operator.jobs import health, oom, refusals
from horus_operator.operator.jobs.pods import TERMINAL_PHASES, PodView
from horus_operator.operator.jobs.refusals import Blame
from horus_operator.operator.moves import migration, preemption


class Phase(StrEnum):
    PENDING = "Pending"
    QUEUED = "Queued"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TERMINAL = frozenset({Phase.SUCCEEDED, Phase.FAILED})
PREEMPTED = "Preempted"  # the Scheduled condition's reason while a preempted pod stops
UNSCHEDULABLE = "Unschedulable"  # the Failed condition's reason: refused twice for a pod-level reason
# Failures the user can fix by editing the spec: a new generation is judged again.
SPEC_REASONS = frozenset({"InvalidSpec", "Unsatisfiable", UNSCHEDULABLE})
CONDITION_ORDER = (
    "Scheduled",
    refusals.CONDITION,
    oom.CONDITION,
    "ClaimsAllocated",
    "Running",
    "Complete",
    "Failed",
    *health.TYPES,
)


@dataclass(frozen=True)
class Decision:
    status: dict[str, Any]
    place_attempt: int | None = None  # attempt number of the pod to place, None: nothing to place
    delete_pods: tuple[str, ...] = ()  # stuck pods to remove before re-placing
    delete_reason: str = ""
    # The status records what deleting the pods takes away (a pod-level refusal, refusals.py): it is
    # stored before they are deleted, as a move is (level-triggered: a restart in between finds either)
    store_first: bool = False
    avoid_node: str = ""  # the node the job's pod was stuck on went away or NotReady: skip it for a while
    # A node kube-scheduler refused the job's pod on for the node's own reasons (taints, cordoned): the
    # job passes it over, everyone once pods of another namespace are refused there (refusals.NodeSuspects)
    suspect_node: str = ""
    # One that refused it for what the pod asks (CPU, memory, affinity) or a reason not known: the job
    # alone passes it over
    passed_node: str = ""
    # A move (operator/moves/migration.py): delete with the job's grace period (None: at once, the node may be
    # gone, with a Replacing Event; 0: at once, without), and place the next pod where the move chose, if it
    # still fits.
    delete_grace_s: int | None = None
    move_to: migration.InProgress | None = None
    moving: migration.InProgress | None = None  # the move under way, whose target is held meanwhile
    # The Event of an out-of-memory ending this decision forgives (jobs/oom.py), stored first
    out_of_memory: str = ""


@dataclass(frozen=True)
class Context:
    now: datetime
    nodes: Collection[str]  # names of nodes that exist
    unschedulable_grace: timedelta = timedelta(seconds=30)
    # Existing nodes that are not Ready, and since when (their Ready condition's last transition).
    not_ready_since: Mapping[str, datetime] = field(default_factory=dict)
    not_ready_grace: timedelta = timedelta(minutes=5)  # Kubernetes' default before it evicts such pods
    verdict: InvalidJob | None = None  # the job cannot run as written
    unsatisfiable: InvalidJob | None = None  # no GPU/node of this cluster can ever fit it
    missing_volume: InvalidJob | None = None  # a PersistentVolumeClaim it names does not exist (volumes.py)
    waiting_message: str = ""  # why the scheduler left it queued
    queue: Mapping[str, Any] | None = None  # its place in the queue and why (status.queue), if told
    extra: Mapping[str, Any] = field(default_factory=dict)  # status fields others own (e.g. observed)
    claims: Mapping[ClaimId, ClaimView] = field(default_factory=dict)  # every ResourceClaim (DRA binding)
    foreign: Mapping[str, str] = field(default_factory=dict)  # GPU UUID -> the claim not Horus's holding it
    preempts: bool = False  # the operator preempts (`--queue-order las`): status.preemptions stop pods
    oom: oom.Ending | None = None  # its newest pod ended out of GPU memory, no recovery recorded yet


def decide(job: JobSpec, current: Mapping[str, Any], pods: Sequence[PodView], ctx: Context) -> Decision:
    if is_final(job, current):
        return Decision(
            status=_final(job, current, ctx), delete_pods=_refused_left(current, pods), delete_grace_s=0
        )
    if ctx.verdict is not None:
        return Decision(_failed(job, current, ctx, "InvalidSpec", str(ctx.verdict)))
    current = preemption.settled(migration.settled(current, pods), pods)
    next_attempt = max(migration.next_attempt(current, pods), preemption.next_attempt(current))
    moving = migration.in_progress(job, current, pods)
    if moving is not None:
        decided = _moving(job, current, pods, moving, next_attempt, ctx)
        if decided is not None:
            return dataclasses.replace(decided, moving=moving)
    preempted = _preempting(job, current, pods, next_attempt, ctx) if ctx.preempts else None
    if preempted is not None:
        return preempted
    live = [p for p in pods if not p.deleting]
    latest = max(live, key=lambda p: p.attempt, default=None)
    if any(p.phase == "Succeeded" for p in live):
        winner = next(p for p in live if p.phase == "Succeeded")
        return Decision(_from_pod(job, current, winner, ctx, Phase.SUCCEEDED, next_attempt))
    if latest is None or latest.phase == "Failed":
        return _without_live_pod(job, current, live, latest, next_attempt, ctx)
    stuck = _stuck_reason(latest, ctx)
    if stuck:
        return _replace(job, current, latest, next_attempt, ctx, stuck)
    phase = Phase.RUNNING if latest.phase == "Running" else Phase.SCHEDULED
    status = _from_pod(job, current, latest, ctx, phase, next_attempt)
    status["message"] += _not_ready_note(latest, ctx)
    return Decision(status)


def _moving(
    job: JobSpec,
    current: Mapping[str, Any],
    pods: Sequence[PodView],
    moving: migration.InProgress,
    next_attempt: int,
    ctx: Context,
) -> Decision | None:
    """A move under way and no newer pod yet (docs: operator/moves/migration.py). None: the pod moved from
    ended by itself (succeeded or failed) before it was deleted, and the job goes on as any job."""
    old = next((p for p in pods if p.attempt == moving.attempt and not p.deleting), None)
    if old is not None and old.phase in TERMINAL_PHASES:
        return None
    if old is not None:
        message = f"moving to {moving.target}: stopping pod {old.name} ({job.grace_period_s}s to checkpoint)"
        return Decision(
            _queued(job, current, ctx, next_attempt, message),
            delete_pods=(old.name,),
            delete_reason=f"moving to {moving.target}: {_last_reason(current)}",
            delete_grace_s=job.grace_period_s,
        )
    stopping = [p.name for p in pods if p.deleting or p.phase not in TERMINAL_PHASES]
    if stopping:
        message = f"moving to {moving.target}: waiting for pod {', '.join(stopping)} to stop"
        return Decision(_queued(job, current, ctx, next_attempt, message))
    message = f"moving to {moving.target}: starting there"
    return Decision(
        _queued(job, current, ctx, next_attempt, message), place_attempt=next_attempt, move_to=moving
    )


def _preempting(
    job: JobSpec, current: Mapping[str, Any], pods: Sequence[PodView], next_attempt: int, ctx: Context
) -> Decision | None:
    """A recorded preemption (docs: operator/moves/preemption.py): its pod is deleted with the job's
    grace period, and the job waits for no GPU until every pod of it has stopped. None: nothing of a
    preemption is left to do; the job waits in the queue as any job."""
    said = str((current.get("preemptions") or [{}])[-1].get("reason", ""))
    victim = preemption.in_progress(current, pods)
    if victim is not None:
        message = f"preempted: stopping pod {victim.name} ({job.grace_period_s}s to checkpoint): {said}"
        return Decision(
            _queued(job, current, ctx, next_attempt, message, reason=PREEMPTED),
            delete_pods=(victim.name,),
            delete_reason=f"preempted: {said}",
            delete_grace_s=job.grace_period_s,
        )
    stopping = preemption.stopping(current, pods)
    if stopping:
        message = f"preempted: waiting for pod {', '.join(p.name for p in stopping)} to stop"
        return Decision(_queued(job, current, ctx, next_attempt, message, reason=PREEMPTED))
    return None


def _last_reason(status: Mapping[str, Any]) -> str:
    return str((status.get("moves") or [{}])[-1].get("reason", ""))


def _without_live_pod(
    job: JobSpec,
    current: Mapping[str, Any],
    live: Sequence[PodView],
    latest: PodView | None,
    next_attempt: int,
    ctx: Context,
) -> Decision:
    # The first OOM beside a co-tenant is not the job's fault (jobs/oom.py): recorded, stored before
    # the retry's pod exists, and not counted. `ctx.oom` is of the newest failed pod: `latest`.
    forgiving = ctx.oom if ctx.oom is not None and ctx.oom.beside else None
    if forgiving is not None:
        current = {**current, **oom.recorded(current, forgiving, _stamp(ctx.now))}
    forgiven = oom.forgiven(current)
    failures = sum(1 for p in live if p.phase == "Failed" and p.name != forgiven)
    if failures > job.backoff_limit:
        message = f"pod {latest.name if latest else ''} failed ({failures} failures > backoffLimit "
        message += f"{job.backoff_limit}): {latest.message if latest else ''}".rstrip(": ")
        return Decision(_failed(job, current, ctx, "BackoffLimitExceeded", message))
    if ctx.unsatisfiable is not None:
        return Decision(_failed(job, current, ctx, "Unsatisfiable", str(ctx.unsatisfiable)))
    if ctx.missing_volume is not None:
        return Decision(_queued(job, current, ctx, next_attempt, f"waiting: {ctx.missing_volume}"))
    message = ctx.waiting_message or "waiting for a GPU"
    if latest is not None and latest.name == forgiven:
        said = oom.message(current[oom.RECOVERY], job.backoff_limit)
        queued = _queued(
            job,
            current,
            ctx,
            next_attempt,
            f"{said}; {message}",
            reason=oom.REASON,
            noting={oom.CONDITION: ("True", oom.REASON, said)},
        )
        event = said if forgiving is not None else ""
        stored = forgiving is not None
        return Decision(queued, place_attempt=next_attempt, store_first=stored, out_of_memory=event)
    if latest is not None:
        message = f"retry {failures}/{job.backoff_limit} after pod {latest.name} failed; {message}"
    return Decision(_queued(job, current, ctx, next_attempt, message), place_attempt=next_attempt)


def is_final(job: JobSpec, current: Mapping[str, Any]) -> bool:
    if current.get("phase") not in TERMINAL:
        return False
    failed = _condition(current, "Failed")
    fixable = failed is not None and failed.get("reason") in SPEC_REASONS
    return not (fixable and current.get("observedGeneration") != job.generation)


def _final(job: JobSpec, current: Mapping[str, Any], ctx: Context) -> dict[str, Any]:
    """A finished job stays as it ended, with two exceptions, each written once. It acknowledges a new
    generation (a spec edited after the end reopens nothing, and kstatus would call a job whose
    observedGeneration lags InProgress for ever); and a job that ended before Horus wrote the health
    conditions (health.py) gains them, so kstatus and Argo CD see it Failed or done."""
    status = dict(current)
    status["observedGeneration"] = job.generation
    if any(_condition(current, kind) is None for kind in health.TYPES):
        phase = str(current.get("phase"))
        failed = _condition(current, "Failed") or {}
        reason = str(failed.get("reason") or phase) if phase == Phase.FAILED else phase
        status["conditions"] = _conditions(
            current, ctx, job, health.conditions(phase, reason, str(current.get("message") or ""))
        )
    return status


def _replace(
    job: JobSpec, current: Mapping[str, Any], pod: PodView, next_attempt: int, ctx: Context, stuck: str
) -> Decision:
    """Delete a stuck pod and place the job again (not before a claim it names exists), past the node
    that refused it (refusals.py). A second pod refused for the same pod-level reason fails
    the job instead. Either is stored before the pod is deleted (`store_first`): no decision in between
    can miss the evidence and place the job again."""
    refusal = _refusal(pod, ctx)
    noting: dict[str, tuple[str, str, str]] = {}
    if refusal is not None and refusal.blame == Blame.JOB:
        refused = refusals.Noted(pod.name, pod.node, refusal.cause)
        before = refusals.noted(current, job.generation)
        if before is not None and refusals.is_repeat(refused, before):
            failed = _failed(job, current, ctx, UNSCHEDULABLE, refusals.repeated(refused, before))
            return Decision(failed, delete_pods=(pod.name,), delete_grace_s=0, store_first=True)
        noting[refusals.CONDITION] = refused.condition(refusal.plugin)
    reason = f"{stuck}: {refusal.cause}" if refusal is not None and refusal.cause else stuck
    node = pod.node if pod.node in ctx.nodes else ""
    return Decision(
        _queued(job, current, ctx, next_attempt, f"re-placing: {reason}", noting=noting),
        place_attempt=next_attempt if ctx.missing_volume is None else None,
        delete_pods=(pod.name,),
        delete_reason=reason,
        store_first=bool(noting),
        avoid_node=node if refusal is None else "",
        suspect_node=node if refusal is not None and refusal.blame == Blame.NODE else "",
        passed_node=node if refusal is not None and refusal.blame in (Blame.ASKED, Blame.UNKNOWN) else "",
    )


def _refusal(pod: PodView, ctx: Context) -> refusals.Refusal | None:
    """What kube-scheduler said of a pod it left unschedulable past the grace period on a node that
    exists; None for a pod stuck otherwise (its node gone or NotReady: the node is to blame)."""
    if (pod.bound_node or pod.node) not in ctx.nodes or not _unschedulable_too_long(pod, ctx):
        return None
    return refusals.judge(pod.scheduling_message)


def _refused_left(current: Mapping[str, Any], pods: Sequence[PodView]) -> tuple[str, ...]:
    """The unbound pods of a job failed for being refused by kube-scheduler, left where the operator
    stopped between storing the failure and deleting them: Horus counts their GPUs held until gone."""
    failed = _condition(current, "Failed") or {}
    if current.get("phase") != Phase.FAILED or failed.get("reason") != UNSCHEDULABLE:
        return ()
    return tuple(
        p.name for p in pods if not p.bound_node and not p.deleting and p.phase not in TERMINAL_PHASES
    )


def _unschedulable_too_long(pod: PodView, ctx: Context) -> bool:
    return pod.unschedulable_since is not None and ctx.now - pod.unschedulable_since > ctx.unschedulable_grace


def _stuck_reason(pod: PodView, ctx: Context) -> str:
    node = pod.bound_node or pod.node
    if node not in ctx.nodes:
        return f"node {node} is gone"
    if _unschedulable_too_long(pod, ctx):
        grace = int(ctx.unschedulable_grace.total_seconds())
        return f"pod {pod.name} unschedulable on {pod.node} for over {grace}s"
    not_ready_since = ctx.not_ready_since.get(node)
    if not_ready_since is not None and ctx.now - not_ready_since > ctx.not_ready_grace:
        return f"node {node} NotReady for over {int(ctx.not_ready_grace.total_seconds())}s"
    return ""


def _not_ready_note(pod: PodView, ctx: Context) -> str:
    """While its node is NotReady but not yet for the grace period, a job says so, and when it moves."""
    node = pod.bound_node or pod.node
    since = ctx.not_ready_since.get(node)
    if since is None:
        return ""
    grace = int(ctx.not_ready_grace.total_seconds())
    return f"; node {node} NotReady since {_stamp(since)}: re-placed if still so {grace}s after"


def _base(
    job: JobSpec, current: Mapping[str, Any], ctx: Context, phase: Phase, attempts: int
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": str(phase),
        "observedGeneration": job.generation,
        "attempts": attempts,
        "queuedAt": current.get("queuedAt") or _stamp(ctx.now),
    }
    for name, value in ctx.extra.items():
        status[name] = value
    for kept in ("moves", "preemptions", "attainedGpuSeconds", oom.RECOVERIES, oom.RECOVERY):
        if current.get(kept):
            status[kept] = current[kept]
    return status


def _queued(
    job: JobSpec,
    current: Mapping[str, Any],
    ctx: Context,
    attempts: int,
    message: str,
    *,
    reason: str = "Waiting",
    noting: Mapping[str, tuple[str, str, str]] | None = None,
) -> dict[str, Any]:
    """`reason`: the Scheduled condition's (Waiting, or Preempted while a preempted pod stops); `noting`:
    other conditions to set (a pod-level refusal, refusals.py)."""
    status = _base(job, current, ctx, Phase.QUEUED, attempts)
    status["message"] = message
    if ctx.queue:
        status["queue"] = dict(ctx.queue)
    updates = {"Scheduled": ("False", reason, message), **(noting or {})}
    updates.update(health.conditions(Phase.QUEUED, "Queued", message))
    status["conditions"] = _conditions(current, ctx, job, updates)
    return status


def _failed(
    job: JobSpec, current: Mapping[str, Any], ctx: Context, reason: str, message: str
) -> dict[str, Any]:
    status = _base(job, current, ctx, Phase.FAILED, int(current.get("attempts") or 0))
    for name in ("node", "gpus", "gpuList", "predicted", "colocatedWith", "startTime", "binding", "claim"):
        if name in current:
            status[name] = current[name]
    status["message"] = message
    status["completionTime"] = current.get("completionTime") or _stamp(ctx.now)
    updates = {
        "Failed": ("True", reason, message),
        "Running": ("False", reason, ""),
        **health.conditions(Phase.FAILED, reason, message),
    }
    status["conditions"] = _conditions(current, ctx, job, updates)
    return status


def _from_pod(
    job: JobSpec, current: Mapping[str, Any], pod: PodView, ctx: Context, phase: Phase, attempts: int
) -> dict[str, Any]:
    status = _base(job, current, ctx, phase, attempts)
    gpus = [
        {"index": index, **({"uuid": pod.gpu_uuids[i]} if i < len(pod.gpu_uuids) else {})}
        for i, index in enumerate(pod.gpu_indices)
    ]
    status.update(
        node=pod.node,
        gpus=gpus,
        gpuList=",".join(str(i) for i in pod.gpu_indices),
        predicted=dict(pod.predicted),
        colocatedWith=list(pod.colocated_with),
        binding=pod.binding,
    )
    if pod.claims:
        status["claim"] = ",".join(pod.claims)
    where = f"pod {pod.name} on {pod.node} GPU {status['gpuList']}"
    started = pod.started_at or (ctx.now if phase != Phase.SCHEDULED else None)
    if phase != Phase.SCHEDULED and started is not None:
        status["startTime"] = current.get("startTime") or _stamp(started)
    if phase == Phase.RUNNING and started is not None:
        ends = estimated_completion(job.total_steps, started, pod.predicted, current.get("observed") or {})
        if ends is not None:
            status["estimatedCompletionTime"] = _stamp(ends)
    updates = {"Scheduled": ("True", "Placed", where)}
    if pod.bound_node:  # kube-scheduler took this pod: an earlier pod-level refusal no longer counts
        updates.update(refusals.settled(current, where))
    allocation = claims.allocation(pod, ctx.claims, ctx.foreign)
    if allocation is not None:
        updates["ClaimsAllocated"] = allocation
    if phase == Phase.SCHEDULED:
        status["message"] = f"{where}, waiting to start"
    elif phase == Phase.RUNNING:
        status["message"] = f"{where} running"
        updates["Running"] = ("True", "PodRunning", where)
    else:
        status["message"] = f"{where} succeeded"
        status["completionTime"] = current.get("completionTime") or _stamp(pod.finished_at or ctx.now)
        updates["Running"] = ("False", "Completed", where)
        updates["Complete"] = ("True", "PodSucceeded", where)
    updates.update(health.conditions(phase, str(phase), status["message"]))
    status["conditions"] = _conditions(current, ctx, job, updates)
    return status


def estimated_completion(
    total_steps: int | None, started: datetime, predicted: Mapping[str, Any], observed: Mapping[str, Any]
) -> datetime | None:
    """When a running job should end: its start plus `total_steps` at the progress rate it reports, or
    else at the predicted step time alone times the predicted slowdown. None without `total_steps` or
    any rate. An estimate: the rate changes as co-tenants come and go."""
    if not total_steps:
        return None
    rate = observed.get("stepsPerSecond")
    if rate:
        return started + timedelta(seconds=total_steps / float(rate))
    step_s = predicted.get("stepSeconds")
    if not step_s:
        return None
    return started + timedelta(seconds=total_steps * float(step_s) * float(predicted.get("slowdown", 1.0)))


def _conditions(
    current: Mapping[str, Any],
    ctx: Context,
    job: JobSpec,
    updates: Mapping[str, tuple[str, str, str]],
) -> list[dict[str, Any]]:
    """Current conditions with `updates` (type -> status, reason, message) applied; the transition time
    changes only when the status does."""
    merged = {c["type"]: dict(c) for c in current.get("conditions") or []}
    for kind, (state, reason, message) in updates.items():
        previous = merged.get(kind)
        changed = previous is None or previous.get("status") != state
        merged[kind] = {
            "type": kind,
            "status": state,
            "reason": reason,
            "message": message,
            "lastTransitionTime": (
                _stamp(ctx.now)
                if previous is None or changed
                else previous.get("lastTransitionTime") or _stamp(ctx.now)
            ),
            "observedGeneration": job.generation,
        }
    order = CONDITION_ORDER
    return [merged[k] for k in sorted(merged, key=lambda k: order.index(k) if k in order else len(order))]


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
