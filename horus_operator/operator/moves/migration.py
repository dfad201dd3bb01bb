"""Moving a running DLJob, as its status records it (`status.moves`). Pure.

A move is level-triggered: the loop first writes an entry `{from, to, reason, trigger, at, attempt,
state: Moving}` (`entry`), and everything after follows from that status and the job's pods
(`reconcile.decide` reads `in_progress`):
1. the pod moved from (attempt `attempt`) still runs: it is deleted with the job's grace period;
2. a pod of the job still exists (stopping, or deleted but not yet gone): nothing is created, so two
   pods of one job never run at once;
3. no pod is left: the job's next pod is created on `to` (if it still fits there, else wherever the
   cycle places it);
4. a pod newer than `attempt` exists: the entry becomes `Moved`, `to` where that pod went (`settled`).
A restart at any point resumes at the step the API server shows. A job that ends (its old pod
succeeds) before its new pod exists just ends.

`mobility` turns what a DLJob's status says into what the move planner (`placement/moves.py`) reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from horus_operator.api.dljob import JobSpec
from horus_operator.operator.jobs.pods import PodView
from horus_operator.placement.moves import Mobility, Move

MOVING, MOVED = "Moving", "Moved"


@dataclass(frozen=True)
class InProgress:
    """The move a job is in the middle of."""

    attempt: int  # of the pod moved from
    node: str  # where it goes
    gpu_indices: tuple[int, ...]

    @property
    def target(self) -> str:
        return where(self.node, self.gpu_indices)


def where(node: str, gpu_indices: Sequence[int]) -> str:
    """`gpu-node-0/1,2`: a node and GPUs in one string (node names have no '/')."""
    return f"{node}/{','.join(str(i) for i in gpu_indices)}"


def _parse_where(text: str) -> tuple[str, tuple[int, ...]] | None:
    node, _, gpus = text.rpartition("/")
    try:
        indices = tuple(int(i) for i in gpus.split(",") if i)
    except ValueError:
        return None
    return (node, indices) if node and indices else None


def entry(move: Move, attempt: int, now: datetime) -> dict[str, Any]:
    """The status.moves entry recorded before the pod of `attempt` is deleted."""
    source, target = move.source, move.target
    return {
        "from": where(source.node, source.gpu_indices),
        "to": where(target.node, target.gpu_indices),
        "reason": move.reason,
        "trigger": move.trigger,
        "at": stamp(now),
        "attempt": attempt,
        "state": MOVING,
    }


def _moves(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    moves = status.get("moves")
    return [m for m in moves if isinstance(m, Mapping)] if isinstance(moves, list) else []


def in_progress(job: JobSpec, status: Mapping[str, Any], pods: Sequence[PodView]) -> InProgress | None:
    """The job's move still under way (its last entry, while `Moving`); None when none is, or the entry
    is unreadable or not one Horus could have written (hand-edited: the job is then placed as any
    waiting job). Status is no control channel: anyone who may patch `dljobs/status` could write an
    entry, so one counts only for a job whose spec allows moving, to as many GPUs as it asks, and for
    the attempt of its pod moved from: that pod still exists, or else no pod of the job is live and none
    is newer."""
    recorded = _recorded(status)
    if recorded is None or not job.migration_allowed or len(recorded.gpu_indices) != job.gpus:
        return None
    if any(p.attempt == recorded.attempt for p in pods):
        return recorded
    live = any(p.holds_gpus for p in pods)
    newer = any(p.attempt > recorded.attempt for p in pods)
    return None if live or newer else recorded


def _recorded(status: Mapping[str, Any]) -> InProgress | None:
    moves = _moves(status)
    if not moves or moves[-1].get("state") != MOVING:
        return None
    last = moves[-1]
    target = _parse_where(str(last.get("to", "")))
    attempt = last.get("attempt")
    if target is None or not isinstance(attempt, int):
        return None
    return InProgress(attempt=attempt, node=target[0], gpu_indices=target[1])


def next_attempt(status: Mapping[str, Any], pods: Sequence[PodView]) -> int:
    """The attempt number of the job's next pod: past every pod's, and past every pod moved from (it
    may be gone by now, and a new pod of its number would look like the one to stop)."""
    moved_from = (m.get("attempt") for m in _moves(status))
    floor = max((a + 1 for a in moved_from if isinstance(a, int)), default=0)
    return max(floor, max((p.attempt for p in pods), default=-1) + 1)


def settled(status: Mapping[str, Any], pods: Sequence[PodView]) -> Mapping[str, Any]:
    """`status` with each `Moving` entry that a newer pod has followed marked `Moved`, `to` where that
    pod went."""
    moves = _moves(status)
    if not any(m.get("state") == MOVING for m in moves):
        return status
    updated = []
    for move in moves:
        attempt = move.get("attempt")
        newer = [p for p in pods if isinstance(attempt, int) and p.attempt > attempt]
        if move.get("state") == MOVING and newer:
            first = min(newer, key=lambda p: p.attempt)
            move = {**move, "to": where(first.node, first.gpu_indices), "state": MOVED}
        updated.append(dict(move))
    return {**status, "moves": updated}


def mobility(job: JobSpec, status: Mapping[str, Any], pod: PodView, now: datetime) -> Mobility:
    """What the planner reads about `job`, running as `pod`, from its status: the observed slowdown of
    its current co-tenancy (since that began, and not before the pod was created), its remaining work
    alone (from `spec.totalSteps` and `status.estimatedCompletionTime`), its moves so far."""
    observed = status.get("observed") or {}
    slowdown = observed.get("slowdown")
    since = parse_time(observed.get("stateSince"))
    if since is not None and pod.created_at is not None:
        since = max(since, pod.created_at)
    moves = _moves(status)
    last = parse_time(moves[-1].get("at")) if moves else None
    current = float(slowdown) if slowdown else float(pod.predicted.get("slowdown") or 1.0)
    return Mobility(
        allowed=job.migration_allowed,
        grace_period_s=float(job.grace_period_s),
        max_slowdown=job.max_slowdown,
        observed_slowdown=float(slowdown) if slowdown else None,
        observed_since=since.timestamp() if since is not None else None,
        remaining_s=_remaining_alone_s(job, status, now, current),
        moves=len(moves),
        last_move_at=last.timestamp() if last is not None else None,
    )


def _remaining_alone_s(
    job: JobSpec, status: Mapping[str, Any], now: datetime, slowdown: float
) -> float | None:
    """Seconds of work left alone: the time to the estimated completion, less the current slowdown's
    share of it; None without `spec.totalSteps` or an estimate."""
    ends = parse_time(status.get("estimatedCompletionTime"))
    if not job.total_steps or ends is None:
        return None
    return max(timedelta(0), ends - now).total_seconds() / max(slowdown, 1.0)


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
