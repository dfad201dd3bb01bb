"""The one scheduling cycle: what the operator's loop and the simulator's engine both run on every change.

A cycle takes a snapshot and the waiting jobs (a `WaitQueue` made by `SchedulingCycle.queue`, in the
cycle's queue order) and
1. orders the queue: priority (higher first), then the jobs that would set the makespan (given a
   horizon, under orders that serve short work first), then those past their starvation bound, then the
   queue order (`placement/queueorder.py`: fifo, shortest-remaining or las), then key; the jobs that
   starve or turn critical by `snapshot.now` move up (`WaitQueue.advance`), the one change the cycle
   makes to its inputs;
2. judges, as it walks the queue, whether any node can ever run each job (`feasibility`): those that
   cannot are returned to be taken off the queue; at most `max_batch` feasible jobs are considered;
   each feasible job's maxSlowdown is capped by the makespan guard (`makespan.guarded`) where the
   snapshot has a horizon and an empty GPU, and the capped request is the one placed
   (`CycleResult.placed`);
3. hides nodes in cooldown (a node that recently refused a pod for reasons the policy cannot see);
4. asks the policy until it places nothing more (or answers `Settled`: the next call would place
   nothing): one `schedule` call looks only `Limits.scan_depth`
   jobs down the queue, and a burst should not wait a cycle per slice; a question the policy answered
   with nothing is not asked again while the borrowed index, the jobs it read and the predictions stay
   the same, or while the jobs the cycle placed are all that started since (`_Unanswered`); a gang is
   placed whole or not at all (`placement/gangs.py`): one placed short takes the cycle's placements
   back and the policy is asked again without it, and one whose members are not all queued is not
   offered;
5. explains, for the waiting jobs the caller asks about, why they still wait, on the cluster as it will
   be once the assignments run.

`moves` is the cycle's last step for callers that move running jobs (`placement/moves.py`): run on the
cluster with the cycle's assignments in it, with the same predictions and node cooldowns.

Pure and deterministic like the rest of `placement`: time is `snapshot.now` on the caller's clock.
Applying the assignments (pods, or simulated starts) is the caller's business.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
from collections.abc import Callable, Collection, Container, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

from horus_operator.placement import gangs
from horus_operator.placement.base import PredictingPolicy
from horus_operator.placement.feasibility import Capacity, Unsatisfiable, unsatisfiable
from horus_operator.placement.index import ClusterIndex
from horus_operator.placement.makespan import guarded
from horus_operator.placement.moves import Mobility, Move, MoveSettings, plan_moves, retarget
from horus_operator.placement.preemption import (
    Preemption,
    PreemptionSettings,
    Service,
    fits_alone,
    plan_preemptions,
)
from horus_operator.placement.queueorder import Ordering, QueueOrder
from horus_operator.placement.types import (
    Assignment,
    ClusterSnapshot,
    JobRequest,
    Node,
    RunningJob,
    Settled,
    explained_alike,
)
from horus_operator.placement.waitqueue import WaitQueue, prefix_length
from horus_operator.prediction.api import Workload


class Cooldowns:
    """Nodes placements avoid until a time (seconds on the snapshot's clock).

    The operator cools a node that left a pod unschedulable (CPU, memory, taints: things the policy does
    not see) so the re-placed job goes elsewhere. The simulator models no such refusals, so it never
    cools a node; it runs the same cycle with none cooling."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def note(self, node: str, until: float) -> None:
        self._until[node] = max(until, self._until.get(node, until))

    def apply(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """`snapshot` with the nodes still cooling at `snapshot.now` marked unschedulable."""
        # Nothing cooling is the simulator's every cycle and the operator's usual one: answer it without
        # walking the nodes (that walk was a third of a 100,000-job simulation under `exclusive`).
        if not self._until:
            return snapshot
        self._until = {node: until for node, until in self._until.items() if until > snapshot.now}
        if not any(node.name in self._until for node in snapshot.nodes):
            return snapshot
        nodes = tuple(
            dataclasses.replace(node, schedulable=False) if node.name in self._until else node
            for node in snapshot.nodes
        )
        # An index knows which nodes are schedulable: re-index from the running jobs it holds.
        running = tuple(snapshot.index.jobs.values()) if snapshot.index is not None else snapshot.running
        return dataclasses.replace(snapshot, nodes=nodes, running=running, index=None)


@dataclass(frozen=True)
class CycleResult:
    assignments: tuple[Assignment, ...] = ()
    # The requests as placed, by key: maxSlowdown capped by the makespan guard. What the caller records
    # as running, so later placements honour the cap.
    placed: dict[str, JobRequest] = field(default_factory=dict)
    unsatisfiable: dict[str, Unsatisfiable] = field(default_factory=dict)  # to take off the queue for good
    explanations: dict[str, str] = field(default_factory=dict)  # key -> why it still waits


class SchedulingCycle:
    """One policy, the predictor it decides with, and the cycle's bounds; `run` once per change.

    - `max_batch`: feasible jobs from the head of the queue the policy may reach per cycle (it reads
      `scan_depth` of them a call, again after each placement).
    - `max_explanations`: waiting jobs (from the head of the queue) explained per cycle; an explanation
      scans every GPU.
    - `ordering`: the queue order of the queues it makes (`queue`).
    """

    def __init__(
        self,
        policy: PredictingPolicy,
        *,
        max_batch: int = 1000,
        max_explanations: int = 50,
        ordering: Ordering | None = None,
    ) -> None:
        self.policy = policy
        self.ordering = ordering or Ordering()
        self.cooldowns = Cooldowns()
        self.max_batch = max_batch
        self.max_explanations = max_explanations
        self._predictions = policy.predictions  # one cache: the policy's answers are the cycle's
        self._nodes: tuple[Node, ...] | None = None
        self._capacity: Capacity | None = None
        self._verdicts: dict[str, tuple[JobRequest, Unsatisfiable | None]] = {}
        # The feasible jobs the last cycle's walk reached, judged on the capacity the verdicts stand for.
        self._reached_feasible: list[JobRequest] = []
        self._unanswered: _Unanswered | None = None

    def step_s(self, workload: Workload, gpu: str) -> float | None:
        """Seconds per training step of `workload` alone on a `gpu` (None where the predictor has no step
        model), from the predictions placement reads."""
        return self._predictions.job(workload, gpu).step_s

    def queue(self, requests: Iterable[JobRequest] = ()) -> WaitQueue:
        """A wait queue of `requests` in this cycle's queue order: what `run` takes."""
        return WaitQueue(requests, ordering=self.ordering)

    def run(
        self,
        snapshot: ClusterSnapshot,
        queue: WaitQueue,
        *,
        explain: Callable[[JobRequest], bool] | None = None,
    ) -> CycleResult:
        """Assignments for `queue` on `snapshot`, and what else the caller must know; `explain` says which
        waiting jobs want a reason (None: none do). Neither input changes but for the jobs that starve
        by `snapshot.now` moving up the queue (a borrowed `snapshot.index` comes back as it was)."""
        if not queue:
            return CycleResult()
        queue.advance(snapshot.now, snapshot.horizon_s)
        self._judge_against(snapshot)
        snapshot = self.cooldowns.apply(snapshot)
        index, borrowed = ClusterIndex.of(snapshot)
        # Capping a job to a whole GPU pays only if one is free: otherwise it waits, and waiting delays
        # it more than sharing would.
        horizon = snapshot.horizon_s if index.empty_count() else None
        # No guard without a horizon (`guarded` would hand every request back as it is).
        guard = None if horizon is None else functools.partial(guarded, now=snapshot.now, horizon=horizon)
        walk = _Walk(
            queue,
            self.max_batch,
            self._verdicts,
            self._reached_feasible,
            self._judge,
            guard,
            queue.gang_members,
        )
        view = snapshot if borrowed else dataclasses.replace(snapshot, index=index)
        placed: dict[str, Assignment] = {}
        # A makespan guard re-caps requests as time passes, and a corrected predictor answers anew:
        # a question is the same one only without a guard and on the same predictions.
        revision = self._predictions.sync()
        remembered = self._unanswered if horizon is None else None
        ask = remembered is None or not remembered.asked_again(view, queue, revision)
        try:
            if ask:
                self._settle(view, index, walk, placed)
            offered, whole_queue = tuple(walk.feasible_by_key.values()), walk.exhausted
            explanations = {} if explain is None else self._explain(view, walk, placed, explain)
        finally:
            if borrowed:
                for key in reversed(list(placed)):
                    index.remove(key)
        if not borrowed or walk.rejected or walk.held or horizon is not None:
            self._unanswered = None
        elif ask:  # the last call answered (or would answer: `Settled`) nothing, on the cluster once the
            # caller has started `placed`
            started = tuple(
                RunningJob(walk.feasible_by_key[key], a.node, a.gpu_indices) for key, a in placed.items()
            )
            left = tuple(request for request in offered if request.key not in placed)
            self._unanswered = _Unanswered(
                index, index.changes, view.nodes, started, left, whole_queue, revision
            )
        trimmed = len(self._verdicts) > 2 * self.max_batch
        if trimmed:  # forget jobs that left the queue (or lie deep in it)
            self._verdicts = {key: self._verdicts[key] for key in walk.reached()}
        # Every job of `_reached_feasible` keeps its verdict in the memo (the walk takes one for the
        # other); a cycle that asked nothing reached none, and the last list still serves.
        if trimmed or walk.feasible:
            self._reached_feasible = walk.feasible
        requests = {key: walk.feasible_by_key[key] for key in placed}
        return CycleResult(tuple(placed.values()), requests, walk.rejected, explanations)

    def moves(
        self,
        snapshot: ClusterSnapshot,
        mobility: Mapping[str, Mobility],
        settings: MoveSettings,
        *,
        waiting: bool,
    ) -> list[Move]:
        """Running jobs to move on `snapshot` (the cluster once this round's assignments run; `waiting`:
        jobs still wait), by `placement.moves.plan_moves`, never onto a node in cooldown."""
        view = self.cooldowns.apply(snapshot)
        return plan_moves(
            view, self._predictions, mobility, settings, limits=self.policy.limits, waiting=waiting
        )

    def preemptions(
        self,
        snapshot: ClusterSnapshot,
        queue: WaitQueue,
        service: Mapping[str, Service],
        settings: PreemptionSettings,
    ) -> list[Preemption]:
        """Running jobs to preempt for the jobs still waiting in `queue` on `snapshot` (the cluster once
        this round's assignments run), by `placement.preemption.plan_preemptions`; only under `las`
        (every other order: none), never on a node in cooldown."""
        if self.ordering.order != QueueOrder.LAS or not queue:
            return []
        view = self.cooldowns.apply(snapshot)
        waiting = ((request, queue.standing(request.key)) for request in queue)
        return plan_preemptions(view, waiting, service, settings, fits_alone(self._predictions.job))

    def retarget(self, snapshot: ClusterSnapshot, job: RunningJob, reason: str) -> Assignment | None:
        """`job` (a moved job, at the GPU its move chose) placed there if it still fits
        (`placement.moves.retarget`)."""
        view = self.cooldowns.apply(snapshot)
        return retarget(view, self._predictions, job, limits=self.policy.limits, reason=reason)

    def _settle(
        self, view: ClusterSnapshot, index: ClusterIndex, walk: _Walk, placed: dict[str, Assignment]
    ) -> None:
        """Ask the policy until it places nothing more, collecting its assignments into `placed` (by job
        key, in the order made); each answer goes into `index` (the view's) so the next call sees it.
        A gang placed short takes every placement back (later ones may have been decided beside its
        members) and is held back (`walk.held`); the policy is asked again without it."""
        while True:
            self._settle_once(view, index, walk, placed)
            short = gangs.short(walk.feasible_by_key[key] for key in placed)
            if not short:
                return
            for key in reversed(list(placed)):
                index.remove(key)
            placed.clear()
            walk.held.update(short)

    def _settle_once(
        self, view: ClusterSnapshot, index: ClusterIndex, walk: _Walk, placed: dict[str, Assignment]
    ) -> None:
        while True:
            more = self.policy.schedule(view, _Remaining(walk, frozenset(placed)))
            for assignment in more:
                request = walk.feasible_by_key[assignment.job]
                index.add(RunningJob(request, assignment.node, assignment.gpu_indices))
                placed[assignment.job] = assignment
            if not more or isinstance(more, Settled):
                return

    def _explain(
        self,
        view: ClusterSnapshot,
        walk: _Walk,
        placed: dict[str, Assignment],
        explain: Callable[[JobRequest], bool],
    ) -> dict[str, str]:
        """Why jobs still wait, for those `explain` picks among the first `max_explanations` waiting."""
        head = itertools.islice(walk.waiting(placed), self.max_explanations)
        said: dict[Hashable, str] = {}  # the policy's answers on this view, by `explained_alike`
        told = {request.key: self._why(view, walk, request, said) for request in head if explain(request)}
        return told | self._explain_gangs(view, walk, explain, said)

    def _why(self, view: ClusterSnapshot, walk: _Walk, request: JobRequest, said: dict[Hashable, str]) -> str:
        fitted = walk.held.get(request.gang, 0)
        why = "" if fitted else self._policy_says(view, request, said)
        return gangs.held_back(request, fitted, why) if request.gang else why

    def _policy_says(self, view: ClusterSnapshot, request: JobRequest, said: dict[Hashable, str]) -> str:
        alike = explained_alike(request)
        if alike not in said:
            said[alike] = self.policy.explain_wait(view, request)
        return said[alike]

    def _explain_gangs(
        self,
        view: ClusterSnapshot,
        walk: _Walk,
        explain: Callable[[JobRequest], bool],
        said: dict[Hashable, str],
    ) -> dict[str, str]:
        """Why the members of gangs held back (which the walk no longer offers) or not all queued wait,
        for those `explain` picks."""
        told: dict[str, str] = {}
        for request in walk.feasible_by_key.values():
            if request.gang in walk.held and explain(request):
                told[request.key] = self._why(view, walk, request, said)
        for request, waiting in walk.unarrived:
            if explain(request):
                told[request.key] = gangs.not_arrived(request, waiting)
        return told

    def _judge_against(self, snapshot: ClusterSnapshot) -> None:
        """Verdicts stand while the cluster's capacity stays the same: the simulator asks on every event
        about a queue that barely changed, with the very same node tuple."""
        if snapshot.nodes is self._nodes:
            return
        self._nodes = snapshot.nodes
        capacity = Capacity.of(snapshot)
        if capacity != self._capacity:
            self._capacity, self._verdicts, self._reached_feasible = capacity, {}, []

    def _judge(self, request: JobRequest) -> Unsatisfiable | None:
        known = self._verdicts.get(request.key)
        if known is None or known[0] is not request:  # a new job, or its request changed
            assert self._capacity is not None
            verdict = unsatisfiable(request, self._capacity, self._predictions.job)
            known = self._verdicts[request.key] = (request, verdict)
        return known[1]


@dataclass(frozen=True)
class _Unanswered:
    """A question the policy answered with nothing: the cluster it saw (a borrowed index, by its change
    count, once the caller has started the jobs placed before that answer) and the jobs it was offered,
    in order. Policies decide from the cluster and the jobs alone (`Policy.schedule`), so the same
    question gets the same answer and is not asked again. In a simulation with a long queue that is
    every arrival that lands behind the jobs policies read, also right after a cycle that placed some
    (every cycle that places ends with a call that answers nothing)."""

    index: ClusterIndex
    changes: int  # before the `started` jobs were added
    nodes: tuple[Node, ...]
    started: tuple[RunningJob, ...]  # placed in that cycle, before the last call
    offered: tuple[JobRequest, ...]  # those not placed
    whole_queue: bool  # the policy read the queue to its end: any job added is news
    revision: int  # of the predictor's corrections (`CachedPredictions.sync`)

    def asked_again(self, view: ClusterSnapshot, queue: WaitQueue, revision: int) -> bool:
        if view.index is not self.index or view.nodes is not self.nodes:
            return False
        if not self.index.changed_only_by(self.changes, self.started):
            return False
        if revision != self.revision:
            return False
        if len(queue) < len(self.offered) or (self.whole_queue and len(queue) != len(self.offered)):
            return False
        return all(map(operator.is_, queue, self.offered))


class _Walk:
    """One cycle's walk down the queue in order, judging each job's feasibility when the walk first
    reaches it: a cycle costs what the policy reads (`scan_depth` jobs a call), not the queue's length.
    At most `limit` feasible jobs are reached, each as `guard` returns it; unsatisfiable ones met on
    the way are `rejected`, members of gangs not all queued (`gang_members` counts the queued ones) are
    `unarrived`, and members of the gangs `held` back are not offered.

    `known` is `judge`'s memo by key (the request judged, its verdict); `last_feasible` the feasible jobs
    the last walk reached on the capacity that memo stands for, in order. Most of a cycle's walk meets those
    again in the same order, less the jobs started since: a job that is the very request the last walk
    found feasible is feasible (its verdict in the memo says so), which the walk sees by following that
    list instead of looking each job up (the look-up was a tenth of a long simulation's time)."""

    def __init__(
        self,
        queue: Iterable[JobRequest],
        limit: int,
        known: Mapping[str, tuple[JobRequest, Unsatisfiable | None]],
        last_feasible: list[JobRequest],
        judge: Callable[[JobRequest], Unsatisfiable | None],
        guard: Callable[[JobRequest], JobRequest] | None,
        gang_members: Callable[[str], int],
    ) -> None:
        self._source = iter(queue)
        self._limit = limit
        self._known = known
        self._last_feasible = last_feasible
        self._last_at = 0  # where the walk is in `_last_feasible`
        self._judge = judge
        self._guard = guard
        self._feasible: list[JobRequest] = []
        self.feasible_by_key: dict[str, JobRequest] = {}
        self.rejected: dict[str, Unsatisfiable] = {}
        self.exhausted = False  # the walk reached the end of the queue
        self._gang_members = gang_members
        self.unarrived: list[tuple[JobRequest, int]] = []  # (member, its gang's members queued)
        self.held: dict[str, int] = {}  # gangs held back this cycle -> how many members had fitted

    def waiting(self, placed: Container[str]) -> Iterator[JobRequest]:
        """The feasible jobs not in `placed` nor in a gang held back, in queue order."""
        feasible, limit, held = self._feasible, self._limit, self.held
        position = 0
        while position < limit:
            if position == len(feasible) and not self._reach(1):
                return
            request = feasible[position]
            position += 1
            if request.key not in placed and not (held and request.gang in held):
                yield request

    def head(self, placed: Collection[str], count: int) -> list[JobRequest]:
        """The first `count` jobs of `waiting(placed)`, reaching exactly as far as it would: `placed` were
        all reached, so the `count`-th other job lies within `count + len(placed)` positions (a gang
        held back skips jobs too: then the jobs are read one by one)."""
        if self.held:
            return list(itertools.islice(self.waiting(placed), count))
        feasible, within = self._feasible, min(count + len(placed), self._limit)
        self._reach(within - len(feasible))
        if not placed:  # the first call of a cycle: nothing to leave out
            return feasible[:within]
        return [request for request in itertools.islice(feasible, within) if request.key not in placed][
            :count
        ]

    @property
    def feasible(self) -> list[JobRequest]:
        """The feasible jobs reached, in order, as `guard` returned them."""
        return self._feasible

    def reached(self) -> Iterator[str]:
        return itertools.chain(self.feasible_by_key, self.rejected)

    def _reach(self, wanted: int) -> bool:
        """Reaches `wanted` more feasible jobs (True), or the end of the queue first (False); in one loop,
        as a call reads its jobs together."""
        if wanted <= 0:
            return True
        known, judge, guard = self._known, self._judge, self._guard
        feasible, feasible_by_key = self._feasible, self.feasible_by_key
        last, at = self._last_feasible, self._last_at
        for request in self._source:
            # The next job the last walk found feasible, or one a few further on (those between have
            # started since): the same request, on the same capacity, is feasible.
            followed = _position_of(request, last, at)
            if followed >= 0:
                at = self._last_at = followed + 1
            else:
                # Most other jobs were judged in an earlier cycle: read the memo here, not through a call.
                verdict = known.get(request.key)
                problem = verdict[1] if verdict is not None and verdict[0] is request else judge(request)
                if problem is not None:
                    self.rejected[request.key] = problem
                    continue
            if request.gang and not gangs.arrived(request, waiting := self._gang_members(request.gang)):
                self.unarrived.append((request, waiting))
                continue
            if guard is not None:
                request = guard(request)
            feasible.append(request)
            feasible_by_key[request.key] = request
            wanted -= 1
            if not wanted:
                return True
        self.exhausted = True
        return False


# How far past the next job the last walk found feasible `_position_of` looks: jobs started since leave
# gaps, a few per cycle.
_FOLLOW_AHEAD = 4


def _position_of(request: JobRequest, last: list[JobRequest], at: int) -> int:
    """Where `request` itself is in `last` from `at`, within `_FOLLOW_AHEAD` places; -1 if not there."""
    for position in range(at, min(at + _FOLLOW_AHEAD + 1, len(last))):
        if last[position] is request:
            return position
    return -1


class _Remaining(Sequence[JobRequest]):
    """The queue one `schedule` call is offered: the walk's feasible jobs not placed earlier in the
    cycle, read lazily (policies read a prefix)."""

    def __init__(self, walk: _Walk, placed: frozenset[str]) -> None:
        self._walk = walk
        self._placed = placed

    def __iter__(self) -> Iterator[JobRequest]:
        return self._walk.waiting(self._placed)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @overload
    def __getitem__(self, position: int) -> JobRequest: ...
    @overload
    def __getitem__(self, position: slice) -> list[JobRequest]: ...
    def __getitem__(self, position: int | slice) -> JobRequest | list[JobRequest]:
        if isinstance(position, slice) and (count := prefix_length(position)) is not None:
            return self._walk.head(self._placed, count)  # a list, not a generator a job at a time
        return list(self)[position]
