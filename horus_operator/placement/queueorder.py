"""Queue orders: how the waiting jobs of one priority line up, and when a job has waited too long.

Priority always comes first (higher first). Within a priority:
- `fifo` — first come first served, the longest remaining work first among jobs submitted together (a
  sweep or a burst: longest-processing-time first is the classic makespan rule, so the job that would
  set the makespan does not start last). The default, and the order before any other existed.
- `shortest-remaining` — the least remaining GPU-work first (remaining seconds alone × GPUs): shortest
  remaining processing time minimises mean completion time. Jobs whose length nobody knows follow those
  whose length is known, in the `las` order.
- `las` — least attained GPU-service first, discretized as Tiresias (NSDI'19) does: a job's attained
  GPU-seconds place it in one of a few levels (`LAS_LEVELS_GPU_S`), first come first served within a
  level; the two dimensions (GPUs × time) are in the GPU-seconds. For clusters where lengths are unknown.

Every order has a starvation bound (`Starvation`): a job that has waited longer than a set time, or than
a multiple of its own length, moves to the front of its priority. The multiple is on by default where the
order reads lengths (`Starvation.of`: shortest-remaining, `DEFAULT_STARVATION_MULTIPLE`), so a day-long
backlog no longer lines most of the queue up by arrival; fifo and las read no lengths and keep the set
time alone. The starved line up by when each was *due*: queued + the multiple × its length where both are
known, else queued + the set time (earliest deadline first, the order that keeps the worst lateness
least). With no multiple that is first come first served, and under `fifo` a bound on the wait alone
never changes the order: the starved are the oldest of their priority already. With a multiple it is
aging in the spirit of highest-response-ratio-next: a job is due once its wait reaches the multiple × its
length, so under an overload where every job waits past the set time the starved still line up
shortest-first among jobs queued close together, where lining them up by arrival turned every order into
`fifo` (the Muri traces, docs/evaluation.md). A job is overtaken only by jobs due before it, so none
starves for ever.

The orders that serve short work first keep the makespan guard's longest-work-first at the end of a
trace: once the caller knows the makespan horizon (all work has arrived: `ClusterSnapshot.horizon_s`),
a job whose remaining work alone reaches `CRITICAL_SHARE` of the time left to it is *critical* and goes
before the starved, longest first — started later it would set the makespan (on Gavel's generator,
where every job arrives at once, shortest-remaining without this ended 16 % later than fifo). Critical
is judged on the lengths the horizon is made of (`JobRequest.remaining_s`, as the makespan guard reads
them), not on the order's: in the simulator those are the trace's true durations.

A key changes while its job waits only when it starves or turns critical, so a sorted queue stays sorted
if the queue re-inserts the job then (`WaitQueue.advance`): attained service grows only while a job runs
(it is part of the request the caller queues again), lengths are the request's, the time it starves is
known when it is queued (`Ordering.starves_at`), and the critical threshold only falls as work is done.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from horus_operator.placement.types import JobRequest

QueueKey = tuple[object, ...]
# Seconds of work a waiting job has left if it ran alone; None when unknown. The operator's requests
# carry their estimate (`JobRequest.remaining_s`); the simulator may pass estimates instead of its truth.
Remaining = Callable[[JobRequest], "float | None"]
# An order's key within one priority (the queue adds priority, starving and the job's key around it).
OrderKey = Callable[[JobRequest], tuple[float, ...]]

# Attained GPU-seconds at which a job drops a LAS level: after one GPU-hour, then after ten. Tiresias
# found two or three levels enough, and its thresholds grow by a factor of ten (its Figure 12).
LAS_LEVELS_GPU_S = (3600.0, 36000.0)
DEFAULT_MAX_WAIT_S = 86400.0  # a day
# The starvation multiple of the orders that read lengths where none is set (`Starvation.of`): a job is
# due once it has waited 10x its own length. Of 3, 5, 10, 20 and 30, 10 did best on the Muri traces, and
# beside the day alone it lowered shortest-remaining's mean JCT on horus-2500, gavel-generator, both Muri
# traces and real-mix-900 (bench/queue_order.py, docs/evaluation.md).
DEFAULT_STARVATION_MULTIPLE = 10.0
# A job whose remaining work alone is at least this share of the time left to the makespan horizon is
# critical. Not 1.0: a critical job still waits for GPUs to free up, which takes a share of the time left.
# 0.6 brought shortest-remaining's makespan back to fifo's on gavel-generator (seed 1); measured across
# traces in bench/queue_order.py.
CRITICAL_SHARE = 0.6


class QueueOrder(StrEnum):
    FIFO = "fifo"
    SHORTEST_REMAINING = "shortest-remaining"
    LAS = "las"


class Standing(IntEnum):
    """Where a waiting job lines up within its priority, first to last."""

    CRITICAL = 0  # would set the makespan if started later: longest remaining work first
    STARVED = 1  # past its starvation bound: first come first served
    WAITING = 2  # in the queue order


def known_remaining(request: JobRequest) -> float | None:
    """The length the request itself carries (the operator's estimate; the simulator's truth)."""
    return request.remaining_s


def las_level(attained_gpu_s: float) -> int:
    return bisect.bisect_right(LAS_LEVELS_GPU_S, attained_gpu_s)


def _fifo(remaining: Remaining) -> OrderKey:
    # The tie-break reads the request's own remaining work, as it always has: the simulator's truth
    # there keeps fifo's decisions what they were before other orders existed.
    return lambda request: (request.submitted_at, -(request.remaining_s or 0.0))


def _las(remaining: Remaining) -> OrderKey:
    return lambda request: (las_level(request.attained_gpu_s), request.submitted_at)


def _shortest_remaining(remaining: Remaining) -> OrderKey:
    las = _las(remaining)

    def key(request: JobRequest) -> tuple[float, ...]:
        left = remaining(request)
        if left is None:
            return (1, *las(request))
        return (0, left * request.gpus, request.submitted_at)

    return key


@dataclass(frozen=True)
class Order:
    key: Callable[[Remaining], OrderKey]  # the order's key within a priority, from where lengths are read
    # Puts critical jobs first at the end of a trace. fifo does not: it serves the oldest (and, among
    # jobs submitted together, the longest) first already, and its decisions stay what they always were.
    longest_first_at_end: bool
    # Bounds a wait by a multiple of the job's length unless told otherwise (`Starvation.of`). Only the
    # order that reads lengths: under fifo a multiple would let a short late job overtake a long early
    # one (no longer first come first served), and las is for clusters where lengths are unknown.
    due_by_length: bool


ORDERS: dict[QueueOrder, Order] = {
    QueueOrder.FIFO: Order(_fifo, longest_first_at_end=False, due_by_length=False),
    QueueOrder.SHORTEST_REMAINING: Order(_shortest_remaining, longest_first_at_end=True, due_by_length=True),
    # las is for clusters where lengths are unknown: it reads none, not even at the end.
    QueueOrder.LAS: Order(_las, longest_first_at_end=False, due_by_length=False),
}


@dataclass(frozen=True)
class Starvation:
    """A job starves once it has waited `max_wait_s`, or `length_multiple` × its remaining work alone
    (where known); None turns either off. The starved line up by when each is due (`due_at`). Built
    directly it has a multiple only if given one; `of` gives an order its default."""

    max_wait_s: float | None = DEFAULT_MAX_WAIT_S
    length_multiple: float | None = None

    @classmethod
    def of(
        cls,
        order: QueueOrder,
        max_wait_s: float | None = DEFAULT_MAX_WAIT_S,
        length_multiple: float | None = None,
    ) -> Starvation:
        """The bound `horus run` and `horus simulate` set for `order`: a multiple not given is the order's
        default (`DEFAULT_STARVATION_MULTIPLE` where it reads lengths, none where it does not), an
        infinite one is none."""
        if length_multiple is None:
            length_multiple = DEFAULT_STARVATION_MULTIPLE if ORDERS[order].due_by_length else None
        elif math.isinf(length_multiple):
            length_multiple = None
        return cls(max_wait_s, length_multiple)

    def starves_at(self, queued_at: float, length_s: float | None) -> float:
        return min(self._capped_at(queued_at), self.due_at(queued_at, length_s))

    def due_at(self, queued_at: float, length_s: float | None) -> float:
        """When a job is due: its wait reaches the multiple × its length, or, where either is unknown,
        `max_wait_s` (inf: never). Not capped by `max_wait_s`: the cap only says when a job moves up,
        and capping the due time too lines every long or unknown job up by arrival again."""
        if self.length_multiple is not None and length_s is not None:
            return queued_at + self.length_multiple * length_s
        return self._capped_at(queued_at)

    def _capped_at(self, queued_at: float) -> float:
        return math.inf if self.max_wait_s is None else queued_at + self.max_wait_s


class Ordering:
    """One queue order with its starvation bound and where it reads lengths: what a `WaitQueue` sorts by."""

    def __init__(
        self,
        order: QueueOrder = QueueOrder.FIFO,
        *,
        starvation: Starvation = Starvation(),
        remaining: Remaining = known_remaining,
    ) -> None:
        self.order = order
        self.starvation = starvation
        self.remaining = remaining
        self.longest_first_at_end = ORDERS[order].longest_first_at_end
        self._key = ORDERS[order].key(remaining)

    def key(self, request: JobRequest, standing: Standing) -> QueueKey:
        """Priority, then standing, then the standing's order, then the job's key so ties are
        deterministic."""
        head = (-request.priority, standing)
        if standing == Standing.CRITICAL:
            return (*head, -(request.remaining_s or 0.0), request.submitted_at, request.key)
        if standing == Standing.STARVED:
            due = self.starvation.due_at(self._queued_at(request), self.remaining(request))
            return (*head, due, request.submitted_at, -(request.remaining_s or 0.0), request.key)
        return (*head, *self._key(request), request.key)

    def reason(self, request: JobRequest, standing: Standing) -> str:
        """Why `request` stands where it does, in words for its status."""
        said = f"priority {request.priority}; " if request.priority else ""
        if standing == Standing.CRITICAL:
            return said + "would set the makespan if started later: longest remaining work first"
        if standing == Standing.STARVED:
            if self.starvation.length_multiple is None:
                return said + "waited past the starvation bound: first come first served"
            return said + "waited past the starvation bound: the earliest due first"
        if self.order == QueueOrder.FIFO:
            return said + "first come first served"
        if self.order == QueueOrder.LAS:
            return said + f"least attained service first: level {las_level(request.attained_gpu_s)}"
        left = self.remaining(request)
        if left is None:
            return said + "length unknown (no spec.totalSteps): after the jobs of known length"
        return said + f"least remaining work first: {left * request.gpus / 3600:.2f} GPU-hours"

    def starves_at(self, request: JobRequest) -> float:
        """When `request` starves (seconds on the caller's clock; inf: never)."""
        return self.starvation.starves_at(self._queued_at(request), self.remaining(request))

    @staticmethod
    def _queued_at(request: JobRequest) -> float:
        return request.submitted_at if request.queued_at is None else request.queued_at

    def critical_from_s(self, now: float, horizon: float | None) -> float | None:
        """The remaining work at which a waiting job is critical at `now` (None: none is)."""
        if horizon is None or not self.longest_first_at_end:
            return None
        return CRITICAL_SHARE * (horizon - now)
