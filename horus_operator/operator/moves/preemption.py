"""Preempting a running DLJob under `--queue-order las`, as its status records it. Pure.

The decision is the shared cycle's (`SchedulingCycle.preemptions`, the plan the simulator executes);
it is carried out the level-triggered way a move is (`migration.py`):
1. the loop writes an entry `{for, reason, at, attempt, state: Preempting}` into `status.preemptions`
   and, in the same write, adds the stopped pod's GPU-seconds to `status.attainedGpuSeconds` (`recorded`);
2. while that pod (attempt `attempt`) still runs, `reconcile.decide` deletes it with the job's grace
   period (`in_progress`); while any pod of the job is still stopping, nothing is created;
3. once no pod is left the job waits in the queue like any other, its attained service counted (it lines
   up behind the job it made room for) and its starvation wait counted from `at` (`queued_at`);
4. a pod newer than `attempt` turns the entry `Preempted` (`settled`).
A restart at any step resumes at the step the API server shows.

A job's attained GPU-service (`attained_gpu_s`) is `status.attainedGpuSeconds` (its runs that
preemptions stopped) plus its running pod's GPUs × the time that pod has run, so it is recomputed from
the status and the pod alone. Runs that ended otherwise (a move, a failure, a lost node) are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.moves.migration import parse_time, stamp
from horus_operator.placement.preemption import Preemption, Service

PREEMPTING, PREEMPTED = "Preempting", "Preempted"


def _entry(preemption: Preemption, pod: PodView, now: datetime) -> dict[str, Any]:
    """The status.preemptions entry recorded before `pod` is deleted."""
    return {
        "for": preemption.for_job,
        "reason": preemption.reason,
        "at": stamp(now),
        "attempt": pod.attempt,
        "state": PREEMPTING,
    }


def recorded(
    status: Mapping[str, Any], preemption: Preemption, pod: PodView, now: datetime
) -> dict[str, Any]:
    """The status fields one write sets for `preemption` of `pod`: its entry appended, the pod's run
    added to the attained service."""
    return {
        "preemptions": [*_entries(status), _entry(preemption, pod, now)],
        "attainedGpuSeconds": round(_settled_gpu_s(status) + _run_gpu_s(pod, now), 1),
    }


def in_progress(status: Mapping[str, Any], pods: Sequence[PodView]) -> PodView | None:
    """The pod a recorded preemption still has to stop (None: none has). Status is no control channel:
    an entry counts only while the operator preempts (the caller's say) and only for the attempt of a
    pod of the job that still runs."""
    attempt = _preempting_attempt(status)
    return next((p for p in pods if p.attempt == attempt and p.holds_gpus), None)


def _preempting_attempt(status: Mapping[str, Any]) -> int | None:
    entries = _entries(status)
    if not entries or entries[-1].get("state") != PREEMPTING:
        return None
    attempt = entries[-1].get("attempt")
    return attempt if isinstance(attempt, int) else None


def stopping(status: Mapping[str, Any], pods: Sequence[PodView]) -> list[PodView]:
    """The recorded preemption's pod while it still runs or is being deleted (one that ended by itself
    does not hold the job back: a pod that succeeded ends the job)."""
    attempt = _preempting_attempt(status)
    return [p for p in pods if p.attempt == attempt and (p.deleting or p.holds_gpus)]


def next_attempt(status: Mapping[str, Any]) -> int:
    """The least attempt number the job's next pod may take: past every pod preempted (it may be gone,
    and a new pod of its number would look like the one to stop)."""
    attempts = (e.get("attempt") for e in _entries(status))
    return max((a + 1 for a in attempts if isinstance(a, int)), default=0)


def settled(status: Mapping[str, Any], pods: Sequence[PodView]) -> Mapping[str, Any]:
    """`status` with its `Preempting` entry marked `Preempted` once a newer pod exists."""
    entries = _entries(status)
    attempt = _preempting_attempt(status)
    if attempt is None or not any(p.attempt > attempt for p in pods):
        return status
    return {**status, "preemptions": [*entries[:-1], {**entries[-1], "state": PREEMPTED}]}


def service(status: Mapping[str, Any], pod: PodView, now: datetime, grace_period_s: int) -> Service:
    """What the preemption planner reads of a job whose pod runs: attained service by now, since when
    the pod runs, how often the job was preempted, and its grace period (`JobSpec.grace_period_s`)."""
    since = pod.started_at or pod.created_at or now
    return Service(
        attained_gpu_s=_settled_gpu_s(status) + _run_gpu_s(pod, now),
        running_since=since.timestamp(),
        preemptions=len(_entries(status)),
        grace_period_s=float(grace_period_s),
    )


def attained_gpu_s(status: Mapping[str, Any]) -> float:
    """A waiting job's attained GPU-service: the runs preemptions stopped."""
    return _settled_gpu_s(status)


def queued_at(status: Mapping[str, Any]) -> float | None:
    """When the job queued again after its last preemption (None: never preempted); its starvation
    wait counts from then."""
    entries = _entries(status)
    at = parse_time(entries[-1].get("at")) if entries else None
    return at.timestamp() if at is not None else None


def _entries(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = status.get("preemptions")
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []


def _settled_gpu_s(status: Mapping[str, Any]) -> float:
    value = status.get("attainedGpuSeconds")
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0


def _run_gpu_s(pod: PodView, now: datetime) -> float:
    since = pod.started_at or pod.created_at
    if since is None:
        return 0.0
    return max(len(pod.gpu_indices), 1) * max((now - since).total_seconds(), 0.0)
