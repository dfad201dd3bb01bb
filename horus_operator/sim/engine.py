"""The discrete-event simulator: policies decide from predictions, jobs advance by the truth.

Events are arrivals and completions. After each event time the scheduling cycle runs — the very
`placement.cycle.SchedulingCycle` the operator runs: queue in priority then the cycle's queue order
(`placement/queueorder.py`, fifo by default), jobs no node can run rejected, the policy asked until it
places nothing more. The simulator keeps a `ClusterIndex` current and hands it in so a cycle does not
re-index the cluster. A job's progress rate is
its isolated throughput divided by its *true* slowdown next to its current co-tenants (the worst over
its GPUs), recomputed whenever a co-tenant arrives or leaves.

If truth says a placement cannot share the GPU (out of memory) the job fails to start, as a pod would
crash, and goes back to the queue (at its arrival's place, ahead of later arrivals) as the operator
retries a DLJob that ran out of memory beside a co-tenant (`placement/oom.py`, the one rule): asking for
a whole GPU (maxSlowdown 1.0), its memory raised; the restart is counted.

Once the whole trace has arrived, each snapshot carries the makespan horizon (`sim/horizon.py`), so
the cycle's makespan guard keeps the jobs that would set the makespan from being slowed; jobs start
with their known remaining work (`JobRequest.remaining_s`: the trace's duration alone).

With online learning (`sim/learning.py`) a job's state (its co-tenants) having held a minute is an
event too: the learner is told its true slowdown, and the cycle runs on the lesson at once.

With migration (`sim/migration.py`) each decision round ends with the cycle's move planner, and the
moves it proposes are made (the job restarts on its target after the grace period and restart cost);
a job over its limit becoming movable is an event too.

With preemption (`sim/preemption.py`, the `las` order) jobs still waiting after a round may preempt
running jobs of more attained service (`SchedulingCycle.preemptions`): those go back to the queue with
their progress kept, and the round places again; a running job becoming preemptable is an event too.

The clock is the event time; nothing reads the wall clock, and all randomness is in the workload, so a
run is a pure function of (scenario, policy, truth).
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import replace

from mypy_extensions import mypyc_attr
from tqdm import tqdm

from horus_operator.api.defaults import SETTLED_S
from horus_operator.placement import oom
from horus_operator.placement.base import TOLERANCE
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.index import ClusterIndex, GpuSlot
from horus_operator.placement.moves import Mobility, Move
from horus_operator.placement.preemption import Preemption, Service
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest, RunningJob
from horus_operator.prediction.api import Workload
from horus_operator.sim.horizon import Horizon
from horus_operator.sim.learning import OnlineLearning, Settled, cotenants_of
from horus_operator.sim.migration import Migration
from horus_operator.sim.preemption import Preempting
from horus_operator.sim.results import JobRecord, RunResult, Sample
from horus_operator.sim.state import ActiveJob, Totals
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, SimJob

# Allocations between the cyclic garbage collector's young collections during a run (Python's default:
# 700). A run allocates objects on every event and keeps hundreds of thousands alive (scenario, queue,
# records), so collections at the default pace took 6 % of a 100,000-job run.
_COLLECT_EVERY = 50_000


@contextlib.contextmanager
def _collected_rarely() -> Iterator[None]:
    """The collector at `_COLLECT_EVERY` for the block, its settings restored after. Nothing a run
    computes depends on when garbage is collected; the memory held meanwhile is a few MiB."""
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], _COLLECT_EVERY), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)


# mypyc (`make compiled`) builds no native subclass of a built-in exception; an ordinary class here.
@mypyc_attr(native_class=False)
class SimulationStuck(RuntimeError):
    """Jobs wait with nothing running and nothing arriving: no policy decision can ever start them."""


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        cycle: SchedulingCycle,
        truth: Truth,
        *,
        progress: bool = False,
        learning: OnlineLearning | None = None,
        migration: Migration | None = None,
        preemption: Preempting | None = None,
    ) -> None:
        """`learning`: told each job state that has held long enough to be observed (`--online-learning`);
        `migration`: moves running jobs (`--migration`); `preemption`: stops running jobs for waiting
        ones of less attained service (under `las`; `sim/preemption.py`)."""
        self.scenario = scenario
        self.cycle = cycle
        self.truth = truth
        self.progress = progress
        self.learning = learning
        self.migration = migration
        self.preemption = preemption
        self.suspended: dict[str, ActiveJob] = {}  # preempted jobs, waiting again: their progress
        self.index = ClusterIndex(scenario.nodes)
        self.queue = cycle.queue()
        self.rejected: dict[str, str] = {}
        self.jobs = {job.request.key: job for job in scenario.jobs}
        self.active: dict[str, ActiveJob] = {}
        self.oom_restarts: dict[str, int] = {}
        self.raised_mib: dict[str, float] = {}  # job -> its memory as its last OOM raised it (oom.py)
        self.records: list[JobRecord] = []
        self.totals = Totals()
        self.horizon = Horizon(scenario.gpu_count)
        self._completions: list[tuple[float, int, str, int]] = []
        self._lessons: list[tuple[float, int, str, int]] = []  # (due, seq, job, state version) to observe
        self._sequence = itertools.count()
        self.now = 0.0

    def run(self) -> RunResult:
        with _collected_rarely():
            return self._run()

    def _run(self) -> RunResult:
        arrivals = self.scenario.jobs
        next_arrival = 0
        with tqdm(
            total=len(arrivals), disable=not self.progress, unit="job", desc=self.cycle.policy.name
        ) as bar:
            while self._drop_stale_completions() or next_arrival < len(arrivals):
                upcoming = arrivals[next_arrival].arrival_s if next_arrival < len(arrivals) else float("inf")
                completion = self._completions[0][0] if self._completions else float("inf")
                lesson = self._lessons[0][0] if self._lessons else float("inf")
                movable = self.migration.next_check_s() if self.migration else float("inf")
                preemptable = self.preemption.next_check_s() if self.preemption else float("inf")
                self._advance_to(min(upcoming, completion, lesson, movable, preemptable))
                bar.update(self._complete_due())
                self._observe_due()
                if self.migration:
                    self.migration.checked(self.now)
                if self.preemption:
                    self.preemption.checked(self.now)
                while next_arrival < len(arrivals) and arrivals[next_arrival].arrival_s <= self.now:
                    self._arrive(arrivals[next_arrival])
                    next_arrival += 1
                self.decide(all_arrived=next_arrival == len(arrivals))
                self._sample()
                if self.queue and next_arrival == len(arrivals) and not self._drop_stale_completions():
                    raise SimulationStuck(self._stuck_message())
        totals = self.totals
        return RunResult(
            policy=self.cycle.policy.name,
            records=tuple(self.records),
            samples=tuple(totals.samples),
            busy_gpu_s=totals.busy_gpu_s,
            throughput_gpu_s=totals.throughput_gpu_s,
            colocated_s=totals.colocated_s,
            measured_colocated_s=totals.measured_colocated_s,
            rejected=self.rejected,
            migration=self.migration.summary() if self.migration else {},
            preemption=self.preemption.summary() if self.preemption else {},
        )

    # -- time --------------------------------------------------------------------------------------
    def _advance_to(self, time_s: float) -> None:
        elapsed = time_s - self.now
        self.totals.busy_gpu_s += self.totals.busy_gpus * elapsed
        self.totals.throughput_gpu_s += self.totals.throughput * elapsed
        self.horizon.worked(self.totals.throughput * elapsed)  # isolated GPU-seconds done
        self.now = time_s

    def _sample(self) -> None:
        totals = self.totals
        totals.samples.append(Sample(self.now, totals.busy_gpus, totals.throughput, len(self.queue)))

    # -- decisions ---------------------------------------------------------------------------------
    def _arrive(self, job: SimJob) -> None:
        self.queue.add(job.request)
        self.horizon.arrived(job.isolated_duration_s * job.request.gpus)

    def decide(self, all_arrived: bool = False) -> None:
        """One decision round at `self.now`: the scheduling cycle on the waiting jobs, then their starts.
        With migration, moves first (a GPU just freed goes to a running job over its limit before a
        waiting one), and again once the last waiting job has started (GPUs left empty may re-pack)."""
        self._migrate()
        if self.queue:
            self._place(all_arrived)
            if self.queue and self._preempt():
                self._place(all_arrived)
            if not self.queue:
                self._migrate()

    def _migrate(self) -> None:
        if self.migration is None or not self.active:
            return
        view = ClusterSnapshot(nodes=self.scenario.nodes, now=self.now, index=self.index)
        mobility = {key: self._mobility(active) for key, active in self.active.items()}
        for move in self.cycle.moves(view, mobility, self.migration.settings, waiting=bool(self.queue)):
            self._move(move)

    def _preempt(self) -> bool:
        """Preempts what the cycle's rule says for the jobs still waiting, and starts each job preempted
        for on the GPUs emptied for it where it still fits there (else the cycle places it, or another
        job, in the round that follows); True if any was preempted."""
        if self.preemption is None or not self.active:
            return False
        view = ClusterSnapshot(nodes=self.scenario.nodes, now=self.now, index=self.index)
        service = {
            key: Service(active.attained_gpu_s(self.now), active.run_since, self.preemption.count(key))
            for key, active in self.active.items()
        }
        preemptions = self.cycle.preemptions(view, self.queue, service, self.preemption.settings)
        for preemption in preemptions:
            self._stop(preemption)
        targets = {preemption.for_job: preemption for preemption in preemptions}
        for preemption in targets.values():
            running = ClusterSnapshot(self.scenario.nodes, tuple(self.index.jobs.values()), now=self.now)
            assignment = self.cycle.retarget(running, preemption.target, preemption.reason)
            if assignment is not None:
                self._start(assignment, preemption.target.request)
        return bool(preemptions)

    def _stop(self, preemption: Preemption) -> None:
        """The job stops with its progress kept and queues again, its attained service counted."""
        assert self.preemption is not None
        key = preemption.job
        active = self.active.pop(key)
        self._settle(active)
        attained = active.attained_gpu_s(self.now)
        self._vacate(active)
        self.suspended[key] = active
        self.preemption.preempted(preemption, self.now)
        submitted = active.job.request
        if key in self.raised_mib:  # it ran out of memory once: it queues again as retried then
            submitted = oom.retried_alone(submitted, self.raised_mib[key])
        self.queue.add(
            replace(
                submitted,
                remaining_s=active.remaining_steps / active.job.steps_per_s_alone,
                attained_gpu_s=attained,
                queued_at=self.now,
            )
        )

    def _place(self, all_arrived: bool) -> None:
        horizon = (
            self.horizon.at(self.now, self.queue.longest_remaining_s(), self._version_of)
            if all_arrived
            else None
        )
        snapshot = ClusterSnapshot(
            nodes=self.scenario.nodes, now=self.now, index=self.index, horizon_s=horizon
        )
        # A job that crashed out of memory is back in the queue at once, as the operator would see it:
        # run the cycle again until one starts everything it places (a restarted job wants a whole GPU,
        # and a job alone always fits, so this ends).
        crashed = True
        while crashed and self.queue:
            result = self.cycle.run(snapshot, self.queue)
            for key, problem in result.unsatisfiable.items():
                self.queue.remove(key)
                self.rejected[key] = problem.message
                job = self.jobs[key]
                self.horizon.dropped(job.isolated_duration_s * job.request.gpus)
            started = [
                self._start(assignment, result.placed[assignment.job]) for assignment in result.assignments
            ]
            crashed = not all(started)

    def _version_of(self, key: str) -> int | None:
        active = self.active.get(key)
        return None if active is None else active.version

    def _start(self, assignment: Assignment, request: JobRequest) -> bool:
        """Starts the assigned job as `request` (as placed: maxSlowdown maybe capped by the makespan
        guard); False if truth says it cannot share that GPU (it is re-queued)."""
        self.queue.remove(assignment.job)
        slots = [self.index.slots[(assignment.node, i)] for i in assignment.gpu_indices]
        together = [[t.request.workload for t in slot.tenants] + [request.workload] for slot in slots]
        if any(self.truth.slowdowns(self.scenario.gpu, ws).slowdowns is None for ws in together):
            self._restart_alone(request, assignment, slots)
            return False
        for slot in slots:
            self.totals.busy_gpus += not slot.tenants
        self.index.add(RunningJob(request, assignment.node, assignment.gpu_indices))
        job = self.jobs[request.key]
        resumed = self.suspended.pop(request.key, None)
        if resumed is None:
            self.active[request.key] = ActiveJob(
                job=job,
                request=request,
                node=assignment.node,
                gpu_indices=assignment.gpu_indices,
                start_s=self.now,
                since_s=self.now,
                remaining_steps=job.total_steps,
                run_since=self.now,
            )
        else:  # a preempted job: its progress and first start kept, its restart cost paid from now
            assert self.preemption is not None
            resumed.request, resumed.node, resumed.gpu_indices = (
                request,
                assignment.node,
                assignment.gpu_indices,
            )
            resumed.since_s = resumed.run_since = self.now
            resumed.paused_until = self.now + self.preemption.settings.cost_s
            resumed.slowdown, resumed.colocated, resumed.measured = 1.0, False, True
            self.active[request.key] = resumed
        if self.preemption is not None:
            self.preemption.started(self.now, request.attained_gpu_s, request.gpus)
        self.totals.throughput += len(assignment.gpu_indices)
        self._rerate_tenants(slots)
        return True

    def _mobility(self, active: ActiveJob) -> Mobility:
        assert self.migration is not None
        return self.migration.mobility(
            active.job.request.key,
            limit=active.job.request.max_slowdown,
            slowdown=active.slowdown,
            since=active.state_since,
            remaining_s=active.remaining_alone_s(self.now),
        )

    def _move(self, move: Move) -> None:
        """Stop the job (its progress kept) and start it on the move's target, where it makes no progress
        for the move's cost; the co-tenants of both GPUs are re-rated."""
        assert self.migration is not None
        active = self.active[move.job]
        target = move.target
        new_slots = [self.index.slots[(target.node, i)] for i in target.gpu_indices]
        together = [
            [t.request.workload for t in slot.tenants] + [active.request.workload] for slot in new_slots
        ]
        if any(self.truth.slowdowns(self.scenario.gpu, ws).slowdowns is None for ws in together):
            self.migration.refused_by_truth += 1
            return
        self._settle(active)
        old_slots = [self.index.slots[(active.node, i)] for i in active.gpu_indices]
        self.index.remove(move.job)
        for slot in old_slots:
            self.totals.busy_gpus -= not slot.tenants
        for slot in new_slots:
            self.totals.busy_gpus += not slot.tenants
        self.index.add(RunningJob(active.request, target.node, target.gpu_indices))
        active.node, active.gpu_indices = target.node, target.gpu_indices
        active.paused_until = self.now + move.cost_s
        self.migration.moved(move, self.now)
        self._rerate_tenants(old_slots + new_slots)

    def _restart_alone(self, request: JobRequest, assignment: Assignment, slots: list[GpuSlot]) -> None:
        """The job crashed out of memory beside its co-tenants: it queues again as the operator retries
        it (`oom.retried_alone`), its memory raised from the prediction it was placed with (no agent
        reads what it reached here), at most its GPU's."""
        self.oom_restarts[request.key] = self.oom_restarts.get(request.key, 0) + 1
        self.raised_mib[request.key] = oom.raised_memory_mib(
            assignment.predicted_memory_mib,
            before_mib=self.raised_mib.get(request.key),
            capacity_mib=min(slot.gpu.memory_mib for slot in slots),
        )
        self.queue.add(oom.retried_alone(request, self.raised_mib[request.key]))

    # -- progress ----------------------------------------------------------------------------------
    def _drop_stale_completions(self) -> bool:
        """Pops completions superseded by a rate change; True if a live one remains."""
        while self._completions:
            _, _, key, version = self._completions[0]
            active = self.active.get(key)
            if active is not None and active.version == version:
                return True
            heapq.heappop(self._completions)
        return False

    def _complete_due(self) -> int:
        finished = 0
        while self._completions and self._completions[0][0] <= self.now:
            _, _, key, version = heapq.heappop(self._completions)
            active = self.active.get(key)
            if active is not None and active.version == version:
                self._finish(active)
                finished += 1
        return finished

    def _observe_due(self) -> None:
        """Tell the learner of each job whose state (version) has held SETTLED_S."""
        while self._lessons and self._lessons[0][0] <= self.now:
            _, _, key, version = heapq.heappop(self._lessons)
            active = self.active.get(key)
            if self.learning is None or active is None or active.version != version:
                continue
            self.learning.settled(
                Settled(
                    key=key,
                    workload=active.request.workload,
                    cotenants=active.cotenants,
                    slowdown=active.slowdown,
                    steps_per_s_alone=active.job.steps_per_s_alone,
                    placed_s=active.start_s,
                    at_s=self.now,
                    busy_alone=self.truth.utilization(self.scenario.gpu, active.request.workload),
                )
            )

    def _finish(self, active: ActiveJob) -> None:
        self._settle(active)
        key = active.job.request.key
        if self.learning is not None:
            self.learning.finished(key)
        del self.active[key]
        self._vacate(active)
        submitted = active.job.request
        self.records.append(
            JobRecord(
                key=key,
                model=submitted.workload.model,
                batch_size=submitted.workload.batch_size,
                gpus=submitted.gpus,
                max_slowdown=submitted.max_slowdown,
                arrival_s=submitted.submitted_at,
                start_s=active.start_s,
                finish_s=self.now,
                isolated_s=active.job.isolated_duration_s,
                total_steps=active.job.total_steps,
                steps_done=active.steps_done,
                worst_true_slowdown=active.worst_slowdown,
                colocated_s=active.colocated_s,
                oom_restarts=self.oom_restarts.get(key, 0),
                node=active.node,
                gpu_indices=active.gpu_indices,
                priority=submitted.priority,
                moves=self.migration.moves_of(key) if self.migration else 0,
                over_limit_s=active.over_limit_s,
            )
        )

    def _settle(self, active: ActiveJob) -> None:
        """Books progress and co-location time since the job's rate last changed."""
        elapsed = self.now - active.since_s
        working = max(0.0, self.now - max(active.since_s, active.paused_until))
        done = min(active.remaining_steps, working * active.job.steps_per_s_alone / active.slowdown)
        active.remaining_steps -= done
        active.steps_done += done
        if active.slowdown > active.job.request.max_slowdown + TOLERANCE:
            active.over_limit_s += elapsed
        if active.colocated:
            active.colocated_s += elapsed
            self.totals.colocated_s += elapsed
            if active.measured:
                active.measured_colocated_s += elapsed
                self.totals.measured_colocated_s += elapsed
        active.since_s = self.now

    def _vacate(self, active: ActiveJob) -> None:
        """Take a job that stopped (finished or preempted) off its GPUs; its co-tenants run faster."""
        self.index.remove(active.job.request.key)
        slots = [self.index.slots[(active.node, i)] for i in active.gpu_indices]
        for slot in slots:
            self.totals.busy_gpus -= not slot.tenants
        self.totals.throughput -= len(active.gpu_indices) / active.slowdown
        self._rerate_tenants(slots)

    def _rerate_tenants(self, slots: list[GpuSlot]) -> None:
        keys = dict.fromkeys(tenant.request.key for slot in slots for tenant in slot.tenants)
        for key in keys:
            self._rerate(self.active[key])

    def _rerate(self, active: ActiveJob) -> None:
        self._settle(active)
        slowdown, measured, colocated = 1.0, True, False
        everyone: list[tuple[str, Workload]] = []
        for gpu_index in active.gpu_indices:
            tenants = self.index.slots[(active.node, gpu_index)].tenants
            everyone.extend((t.request.key, t.request.workload) for t in tenants)
            colocated = colocated or len(tenants) > 1
            truth = self.truth.slowdowns(self.scenario.gpu, [t.request.workload for t in tenants])
            if truth.slowdowns is None:
                raise RuntimeError(f"truth has no slowdown for a running set on {active.node}/{gpu_index}")
            position = next(i for i, t in enumerate(tenants) if t.request.key == active.job.request.key)
            slowdown = max(slowdown, truth.slowdowns[position])
            measured = measured and truth.measured
        gpus = len(active.gpu_indices)
        self.totals.throughput += gpus / slowdown - gpus / active.slowdown
        active.slowdown, active.measured, active.colocated = slowdown, measured, colocated
        active.cotenants = cotenants_of(active.job.request.key, everyone)
        active.worst_slowdown = max(active.worst_slowdown, slowdown)
        active.version += 1
        active.state_since = self.now
        alone_s = active.remaining_steps / active.job.steps_per_s_alone
        key = active.job.request.key
        resumes = max(self.now, active.paused_until)
        self.horizon.running(key, active.version, resumes + alone_s)
        finish_s = resumes + alone_s * slowdown
        if self.migration is not None:
            self.migration.rated(key, slowdown, active.job.request.max_slowdown, self.now)
        heapq.heappush(self._completions, (finish_s, next(self._sequence), key, active.version))
        if self.learning is not None:
            due = self.now + SETTLED_S
            heapq.heappush(self._lessons, (due, next(self._sequence), key, active.version))

    def _stuck_message(self) -> str:
        policy = self.cycle.policy
        snapshot = ClusterSnapshot(nodes=self.scenario.nodes, now=self.now, index=self.index)
        lines = [f"{len(self.queue)} job(s) can never start under {policy.name}, e.g.:"]
        for request in itertools.islice(self.queue, 3):
            why = policy.explain_wait(snapshot, request)
            lines.append(f"  {request.key} ({request.workload.model}, {request.gpus} GPU): {why}")
        return "\n".join(lines)
