"""`horus`: interference-aware placement from predicted utilization, memory and slowdown.

One call repeats a small decision until nothing more can start:

1. **Window.** Look at the first `lookahead` jobs of the queue together (the Horus paper uses 5; a
   wider window finds better partners, and starvation is bounded by step 2). If nothing in the window
   can start, the next `lookahead` jobs are tried (backfilling, as kube-scheduler does), down to
   `Limits.scan_depth`.
2. **Head first when it starves.** Once the head of the queue is `patience_s` older than the next job
   (younger jobs keep overtaking it), it takes its best option; if it has none and needs one GPU, one
   shared GPU is held back from the others so it drains for the head.
3. **Empty GPUs first, loners first.** An idle GPU is the worst outcome, so while empty GPUs exist the
   window's job with the *poorest* predicted pairing prospects starts alone (jobs that ask for whole
   GPUs, multi-GPU jobs, jobs every candidate partner would slow past someone's maxSlowdown). Good
   pairers stay in the window to be matched.
4. **Then pairs.** With no empty GPU, every (shareable GPU, window job) combination is scored by the
   predicted gain in the GPU's normalised throughput (sum over its jobs of 1 / predicted slowdown, after
   minus before), less a small penalty for predicted utilization above 100%. The best combination
   starts if it gains at least `min_gain` and keeps every affected job's predicted slowdown under its
   maxSlowdown / (1 + `Limits.qos_margin`). Predicted memory (plus `Limits.memory_margin_mib`) never exceeds
   the GPU's, and measured telemetry can only remove candidates.
5. **Keep whole nodes for wide jobs.** Where a job starts alone, its node is the one whose empty GPUs
   it leaves least fragmented for the size mix of the queued jobs the call reads
   (`placement/fragmentation.py`, FGD's expected fragmentation; best fit where no wide job waits). A
   one-GPU job that would strand empty GPUs wide waiting jobs need shares a GPU instead when a pairing's
   score beats 1 - `fragmentation_weight` x the GPUs it would strand, less `wide_wait_cost` while a
   wide job finds no node with room: it waits for a node to drain, which an opened GPU delays.

A combination's score is a pure function of (GPU group, job workload, job maxSlowdown) and the
predictions, so it is memoised until the predictor learns something (its revision, see
`prediction/correction.py`): a call costs dictionary look-ups, not predictions.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from horus_operator.placement import nodefrag, shares
from horus_operator.placement.base import (
    Limits,
    PlacedCluster,
    PlacementCall,
    RequestKinds,
    summarise_reasons,
)
from horus_operator.placement.fragmentation import WHOLE_GPU, ShareMix, SizeMix
from horus_operator.placement.index import (
    GpuKey,
    GpuSlot,
    GroupKey,
    group_token,
    wants_whole_gpus,
)
from horus_operator.placement.predictions import CachedPredictions
from horus_operator.placement.types import Assignment, ClusterSnapshot, JobRequest
from horus_operator.prediction.api import Predictor, Workload


@dataclass(frozen=True)
class HorusTunables:
    """- `lookahead`: queue jobs considered together for pairing (more: better pairs, less FIFO).
    - `min_gain`: least predicted gain in a GPU's normalised throughput for a newcomer to join it.
    - `patience_s`: the head of the queue is served first once the next job is this much younger.
    - `utilization_weight`: score penalty per unit of predicted summed utilization above 1.0.
    - `fragmentation_weight`: score, in a GPU's normalised throughput, lost per empty GPU a job alone
      strands for the waiting jobs' size mix (0: best fit, and never share to keep a node whole).
    - `wide_wait_cost`: score, in a GPU's normalised throughput, lost by a one-GPU job opening an empty
      GPU while a multi-GPU job the call reads finds no node with enough empty GPUs (share or wait,
      against the queue): a pairing scoring above 1 - this shares instead, so nodes drain for the
      wide job (0: open the empty GPU).
    - `share_fragmentation`: see below.
    """

    lookahead: int = 16
    min_gain: float = 0.1
    patience_s: float = 4 * 3600.0
    utilization_weight: float = 0.05
    fragmentation_weight: float = 1.0
    wide_wait_cost: float = 0.4
    # Jobs that state their share (`JobRequest.gpu_milli`) go where they add least to FGD's expected
    # fragmentation for the stated requests seen so far (`ShareMix`), then best fit; False: best fit.
    share_fragmentation: bool = True


@dataclass(frozen=True)
class ShareVerdict:
    """What a newcomer does to one GPU group, by prediction: `score` to rank, slowdowns to explain."""

    gain: float
    score: float
    slowdowns: tuple[float, ...]  # tenants in group order, then the newcomer


class _VerdictRow:
    """One GPU group's verdicts on newcomers, by signature, and the signatures it admits at all (judged
    a `ShareVerdict`, whatever the gain)."""

    __slots__ = ("admitted", "verdicts")

    def __init__(self) -> None:
        self.verdicts: dict[int, ShareVerdict | str] = {}
        self.admitted: set[int] = set()

    def judged(self, signature: int, verdict: ShareVerdict | str) -> ShareVerdict | str:
        self.verdicts[signature] = verdict
        if isinstance(verdict, ShareVerdict):
            self.admitted.add(signature)
        return verdict


@dataclass(frozen=True)
class Option:
    request: JobRequest
    slots: tuple[GpuSlot, ...]
    score: float
    reason: str


class HorusPolicy:
    name = "horus"

    def __init__(
        self, predictor: Predictor, limits: Limits | None = None, tunables: HorusTunables | None = None
    ) -> None:
        self.predictions = CachedPredictions(predictor)
        self.limits = limits or Limits()
        self.tunables = tunables or HorusTunables()
        # group token -> newcomer signature -> verdict: a row per group, so the pairing loop reads one
        # dictionary per (group, job) and builds no key.
        self._verdicts: dict[int, _VerdictRow] = {}
        # The newcomer's half of a verdict's memo key, and what makes two queued jobs alike for placement.
        self._signature = RequestKinds(_signature)
        self._verdicts_revision = self.predictions.sync()
        # What the last call searched in vain after its last placement: the confirming call that follows
        # it need not search there again.
        self._searched: _Searched | None = None
        self._share_mix = ShareMix()  # the stated shares read so far
        # The same, by kind with CPU, memory and GPU types, once requests state them (`nodefrag`)
        self._node_mix = nodefrag.NodeMix()
        self._node_states = nodefrag.NodeStates()

    def _drop_stale_verdicts(self) -> None:
        """Verdicts judged by predictions that have been corrected since are wrong now."""
        revision = self.predictions.sync()
        if revision != self._verdicts_revision:
            self._verdicts.clear()
            self._verdicts_revision = revision

    # -- the decision ----------------------------------------------------------------------------
    def schedule(self, snapshot: ClusterSnapshot, queue: Sequence[JobRequest]) -> list[Assignment]:
        self._drop_stale_verdicts()
        previous, self._searched = self._searched, None
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            if not call.has_room():
                return []
            candidates = list(queue[: self.limits.scan_depth])
            # The sizes the call reads: the jobs a node's empty GPUs are kept for (none when the weight
            # is 0). Which node an option takes depends on it, never whether one exists, so what
            # `_Searched` remembers of a search in vain holds whatever the mix.
            mix = SizeMix.of(candidates) if self.tunables.fragmentation_weight else SizeMix()
            # The multi-GPU jobs the call reads, which a one-GPU job may share a GPU to make room for.
            wide = (
                [request for request in candidates if request.gpus > 1]
                if self.tunables.wide_wait_cost
                else []
            )
            known = previous if previous is not None and previous.still_holds(call, candidates) else None
            first = 0  # candidates before this one are placed or passed over (nothing fit them)
            held: set[GpuKey] = set()
            # Jobs alike (same signature) fit the same places: once one found none, its likes are
            # skipped until a placement changes the cluster. Keeps backfilling from re-asking.
            hopeless: set[int] = set()
            placed_at = 0  # `first` when the last placement was made
            while call.has_room():
                if known is not None and not call.placed and known.covers(first, held):
                    first += known.whole_windows(first, self.tunables.lookahead)
                    hopeless = hopeless | known.hopeless
                    known = None
                window, after = self._window(call, candidates, first)
                if not window:
                    if call.placed:
                        self._searched = _Searched.after(call, candidates, placed_at, held, hopeless)
                    break
                unique, window_signatures = self._unlike(window, hopeless)
                option, held = self._choose(call, window, unique, held, first == 0, mix, wide)
                if option is None:  # backfill: look further down the queue
                    hopeless = window_signatures
                    first = after
                    continue
                call.place(option.request, option.slots, option.reason)
                hopeless.clear()
                placed_at = first
            assignments = call.assignments
        if self._searched is not None:
            self._searched.cluster.handed_back()
        return assignments

    def _window(
        self, call: PlacementCall, candidates: list[JobRequest], first: int
    ) -> tuple[list[JobRequest], int]:
        """The next `lookahead` candidates from `first` not placed yet, and the position after the last
        (found by counting: `list.index` would compare requests field by field)."""
        lookahead, placed = self.tunables.lookahead, call.placed
        if not placed:  # nothing to skip: a slice
            sliced = candidates[first : first + lookahead]
            return sliced, first + len(sliced)
        window: list[JobRequest] = []
        position = first
        while position < len(candidates) and len(window) < lookahead:
            if candidates[position].key not in placed:
                window.append(candidates[position])
            position += 1
        return window, position

    def _unlike(self, window: list[JobRequest], hopeless: set[int]) -> tuple[list[JobRequest], set[int]]:
        """The first job of each signature in `window`, minus signatures known to fit nowhere (the first
        of alike jobs is the one any option would pick: earlier in the queue wins ties); and those
        signatures together with `hopeless`."""
        kinds = self._signature
        signatures = [kinds.of(request) for request in window]
        if hopeless.issuperset(signatures):  # most windows a call reads past: nothing new to sort out
            return [], hopeless
        seen = set(hopeless)
        unique = []
        for request, signature in zip(window, signatures, strict=True):
            if signature not in seen:  # the first of its signature: the earliest wins
                seen.add(signature)
                unique.append(request)
        return unique, seen

    def _choose(
        self,
        call: PlacementCall,
        window: list[JobRequest],
        unique: list[JobRequest],
        held: set[GpuKey],
        at_head: bool,
        mix: SizeMix,
        wide: list[JobRequest],
    ) -> tuple[Option | None, set[GpuKey]]:
        """The next placement from `window` (choosing among its `unique` jobs), and the GPUs held
        back for a starving queue head."""
        stated = [request for request in unique if request.gpu_milli]
        if stated:  # no prediction places these: the first that fits goes
            option = self._first_stated(call, stated, held)
            if option is not None:
                return option, held
            unique = [request for request in unique if not request.gpu_milli]
        head = window[0]
        starving = len(window) > 1 and window[1].submitted_at - head.submitted_at > self.tunables.patience_s
        if at_head and not held and starving:
            option = self._alone(call, head, held, mix) or self._best_share(call, [head], held, min_gain=1e-9)
            if option is not None:
                return option, held
            held = self._hold_for(call, head)
        if not unique:
            return None, held
        if call.index.empty_count() > len(held):
            option = self._loner_first(call, unique, held, mix)
            if option is not None:
                return self._unless_sharing_keeps_room(call, option, unique, held, wide), held
        return self._best_share(call, unique, held, min_gain=self.tunables.min_gain), held

    def _unless_sharing_keeps_room(
        self,
        call: PlacementCall,
        alone: Option,
        unique: list[JobRequest],
        held: set[GpuKey],
        wide: list[JobRequest],
    ) -> Option:
        """`alone`, or, where a one-GPU job alone costs waiting wide jobs (its score, less
        `wide_wait_cost` while one of `wide` waits, below 1), the best pairing whose score beats that:
        an idle GPU kept so a node can drain for a wide job is worth the pair's slowdown only while that
        job waits. A wide job never waits for it."""
        if alone.request.gpus > 1:
            return alone
        score = alone.score - (self.tunables.wide_wait_cost if _a_wide_job_waits(call, wide) else 0.0)
        if score >= 1.0:
            return alone
        shared = self._best_share(call, unique, held, min_gain=max(self.tunables.min_gain, score))
        if shared is None:
            return alone
        reason = f"{shared.reason}; keeps empty GPUs for waiting multi-GPU jobs"
        return Option(shared.request, shared.slots, shared.score, reason)

    # -- options ---------------------------------------------------------------------------------
    def _first_stated(
        self, call: PlacementCall, stated: list[JobRequest], held: set[GpuKey]
    ) -> Option | None:
        """The first of `stated` (jobs that state their share) that fits: whole GPUs as any job alone
        takes them, a fraction where it strands least (`_on_a_share`)."""
        for request in stated:
            self._share_mix.note(request)
            self._node_mix.note(request)
        if self.tunables.share_fragmentation and self._node_mix.states_host:
            return self._on_a_node(call, stated, held)
        sizes = self._share_mix.sizes if self.tunables.share_fragmentation else SizeMix()
        for request in stated:
            if request.gpu_milli >= WHOLE_GPU:
                option = self._alone(call, request, held, sizes)
            else:
                option = self._on_a_share(call, request, held)
            if option is not None:
                return option
        return None

    def _on_a_node(self, call: PlacementCall, stated: list[JobRequest], held: set[GpuKey]) -> Option | None:
        """The first of `stated` that fits, where it adds least to its node's expected fragmentation for
        the kinds of requests seen, CPU, memory and GPU types included (`nodefrag`)."""
        for request in stated:
            slots = nodefrag.cheapest_slots(call, request, held, self._node_mix, self._node_states)
            if slots is not None:
                reason = f"its stated {request.gpu_milli}/{WHOLE_GPU} of a GPU where its node fragments least"
                return Option(request, slots, 1.0, reason)
        return None

    def _on_a_share(self, call: PlacementCall, request: JobRequest, held: set[GpuKey]) -> Option | None:
        weigh = self.tunables.share_fragmentation
        slot = shares.slot_for_share(
            call, request, held, self._share_mix, weigh, self.limits.max_jobs_per_gpu
        )
        if slot is None:
            return None
        reason = f"its stated {request.gpu_milli}/{WHOLE_GPU} of a GPU where it fragments least"
        return Option(request, (slot,), 1.0, reason)

    def _alone(
        self, call: PlacementCall, request: JobRequest, held: set[GpuKey], mix: SizeMix
    ) -> Option | None:
        """`request` alone on empty GPUs of one node: the node whose empty GPUs it fragments least for
        `mix`, then best fit. Scored 1 less `fragmentation_weight` x the GPUs it strands."""
        taken = request.gpus
        for free in mix.node_order(taken, call.index.empty_counts()):
            for _node, empty in call.index.nodes_with_exactly(free):
                fitting = [s for s in empty if s.key not in held and call.room(request, s) is None]
                if len(fitting) >= taken:
                    stranded = max(0.0, mix.cost(free, taken))
                    score = 1.0 - self.tunables.fragmentation_weight * stranded
                    return Option(request, tuple(fitting[:taken]), score, "alone on an empty GPU")
        return None

    def _loner_first(
        self, call: PlacementCall, window: list[JobRequest], held: set[GpuKey], mix: SizeMix
    ) -> Option | None:
        best: tuple[float, Option] | None = None
        for request in window:
            option = self._alone(call, request, held, mix)
            if option is None:
                continue
            prospects = self._pairing_prospects(call, request, window, option.slots[0])
            if best is None or prospects < best[0]:
                best = (prospects, option)
        if best is None:
            return None
        prospects, option = best
        reason = (
            f"alone on an empty GPU (best predicted pairing gain {prospects:.2f} "
            "among the queue's head and the shared GPUs)"
        )
        return Option(option.request, option.slots, option.score, reason)

    def _pairing_prospects(
        self, call: PlacementCall, request: JobRequest, window: list[JobRequest], slot: GpuSlot
    ) -> float:
        """Best predicted gain `request` could make sharing: with a shared GPU now, or as the first
        tenant of `slot` that another window job then joins."""
        if wants_whole_gpus(request):
            return 0.0
        best = 0.0
        signature = self._signature.of(request)
        for group in call.index.shared_groups(below=self.limits.max_jobs_per_gpu):
            verdict = self._verdict(call, group.token, group.key, signature, request)
            if isinstance(verdict, ShareVerdict):
                best = max(best, verdict.gain)
        host_key = (slot.product, slot.gpu.memory_mib, ((request.workload, request.max_slowdown),))
        host = group_token(host_key)
        for other in window:
            if other is not request and not wants_whole_gpus(other):
                verdict = self._verdict(call, host, host_key, self._signature.of(other), other)
                if isinstance(verdict, ShareVerdict):
                    best = max(best, verdict.gain)
        return best

    def _best_share(
        self, call: PlacementCall, candidates: list[JobRequest], held: set[GpuKey], min_gain: float
    ) -> Option | None:
        # (score, -position, request, GPU, verdict): the Option, and its reason, made for the winner only
        best: tuple[float, int, JobRequest, GpuSlot, ShareVerdict] | None = None
        shareable = [
            (position, request, self._signature.of(request))
            for position, request in enumerate(candidates)
            if not wants_whole_gpus(request)
        ]
        if not shareable:
            return None
        signatures = {signature for _, _, signature in shareable}
        for group in call.index.shared_groups(below=self.limits.max_jobs_per_gpu):
            row = self._verdict_row(group.token)
            if not row.verdicts.keys() >= signatures:
                for _, request, signature in shareable:
                    if signature not in row.verdicts:
                        row.judged(signature, self._judge(call, group.key, request))
            # Most pairings are refused: ask the row which signatures it admits at all, as one set
            # operation, before reading any verdict.
            admitted = row.admitted
            if admitted.isdisjoint(signatures):
                continue
            for position, request, signature in shareable:
                if signature not in admitted:
                    continue
                verdict = row.verdicts[signature]
                if not isinstance(verdict, ShareVerdict) or verdict.gain < min_gain:
                    continue
                if best is not None and (verdict.score, -position) <= (best[0], best[1]):
                    continue
                slot = call.first_with_room(request, group.slots.values(), held)
                if slot is not None:
                    best = (verdict.score, -position, request, slot, verdict)
        if best is None:
            return None
        score, _, request, slot, verdict = best
        return Option(request, (slot,), score, self._share_reason(verdict))

    def _hold_for(self, call: PlacementCall, head: JobRequest) -> set[GpuKey]:
        """GPUs nobody else may take in this call, so they drain for a starving head of the queue.

        Only for single-GPU heads: draining a whole node for a wide job idles its GPUs for as long as
        its longest job runs (days on the Muri traces: mean JCT 1.42x exclusive with node holds, 0.96x
        without), so wide jobs wait as they would under kube-scheduler."""
        if head.gpus > 1:
            return set()
        for group in call.index.shared_groups(below=2):
            return {next(iter(group.slots))}
        return set()

    # -- prediction verdicts (memoised) ----------------------------------------------------------
    def _verdict(
        self, call: PlacementCall, token: int, group_key: GroupKey, signature: int, request: JobRequest
    ) -> ShareVerdict | str:
        row = self._verdict_row(token)
        verdict = row.verdicts.get(signature)
        if verdict is None:
            verdict = row.judged(signature, self._judge(call, group_key, request))
        return verdict

    def _verdict_row(self, token: int) -> _VerdictRow:
        row = self._verdicts.get(token)
        if row is None:
            row = self._verdicts[token] = _VerdictRow()
        return row

    def _judge(self, call: PlacementCall, group_key: GroupKey, request: JobRequest) -> ShareVerdict | str:
        product, memory_mib, tenants = group_key
        predictions = call.predictions
        needed = sum(predictions.job(workload, product).memory_mib for workload, _ in tenants)
        needed += predictions.job(request.workload, product).memory_mib + self.limits.memory_margin_mib
        if needed > memory_mib:
            return "not enough GPU memory (predicted)"
        workloads = [workload for workload, _ in tenants]
        after = predictions.slowdowns(product, [*workloads, request.workload], memory_mib)
        if after is None:
            return "predicted not to fit together"
        limits = [max_slowdown for _, max_slowdown in tenants] + [request.max_slowdown]
        spreads = predictions.spreads(product, [*workloads, request.workload], memory_mib)
        for slowdown, max_slowdown, spread in zip(after, limits, spreads, strict=True):
            if not self.limits.admits(slowdown, max_slowdown, spread):
                return _over_limit(slowdown, max_slowdown, spread, self.limits)
        before = predictions.slowdowns(product, workloads, memory_mib) or (1.0,) * len(workloads)
        # The 0.0 starts keep the sums floats where `before` is empty (mypyc's floats reject an int 0).
        gain = sum((1.0 / s for s in after), 0.0) - sum((1.0 / s for s in before), 0.0)
        jobs = [*workloads, request.workload]
        utilization = sum((predictions.job(w, product).utilization for w in jobs), 0.0)
        score = gain - self.tunables.utilization_weight * max(0.0, utilization - 1.0)
        return ShareVerdict(gain=gain, score=score, slowdowns=after)

    @staticmethod
    def _share_reason(verdict: ShareVerdict) -> str:
        return (
            f"shares a GPU: predicted slowdown {verdict.slowdowns[-1]:.2f}×, co-tenants "
            f"{', '.join(f'{s:.2f}×' for s in verdict.slowdowns[:-1])}, all within maxSlowdown; "
            f"GPU throughput +{verdict.gain:.2f}"
        )

    # -- why a job waits -------------------------------------------------------------------------
    def explain_wait(self, snapshot: ClusterSnapshot, request: JobRequest) -> str:
        self._drop_stale_verdicts()
        with PlacementCall(snapshot, self.predictions, self.limits) as call:
            if self._alone(call, request, set(), SizeMix()) is not None:
                return "waiting: an empty GPU fits; jobs ahead in the queue go first"
            return summarise_reasons(self._rejections(call, request), call.unusable())

    def _rejections(self, call: PlacementCall, request: JobRequest) -> Iterator[str]:
        for slot in call.index.slots.values():
            if not slot.usable:
                continue
            reason = call.room(request, slot)
            if reason is None and slot.tenants:
                key = slot.group_key()
                verdict = self._verdict(call, group_token(key), key, self._signature.of(request), request)
                if isinstance(verdict, str):
                    reason = f"no GPU keeps the slowdowns under maxSlowdown: {verdict}"
                elif verdict.gain < self.tunables.min_gain:
                    reason = f"sharing would gain too little throughput (+{verdict.gain:.2f})"
                else:
                    reason = "a shared GPU fits; jobs ahead in the queue go first"
            yield reason or f"fewer than {request.gpus} free GPUs on one node"


class _Searched:
    """Where a call that placed jobs searched in vain after its last placement: on the cluster with its
    placements made and `held` GPUs held back, the jobs it read from position `start` to their end
    (positions among the jobs it did not place), whose signatures are `hopeless`.

    The scheduling cycle asks again after a call that placed jobs, in case a placement opened room (a
    job alone on a GPU that was empty is a partner now) for a job passed over before it. That call reads
    the same jobs less those placed, and a few more, and nearly always finds nothing. Whether a job has
    an option outside the head's window (whose starvation check may hold GPUs back) depends only on the
    cluster, the GPUs held back and the predictions, and a job skipped as the like of one that had none
    was skipped the same way both times: so the second call finds nothing in the windows this search
    covered, and it may move on past them with their signatures hopeless, choosing as it would have.
    Valid only for the next call, and only on this cluster (`still_holds`)."""

    def __init__(
        self,
        cluster: PlacedCluster,
        unplaced: tuple[JobRequest, ...],
        start: int,
        held: frozenset[GpuKey],
        hopeless: frozenset[int],
    ) -> None:
        self.cluster = cluster
        self._unplaced = unplaced
        self._start = start
        self._held = held
        self.hopeless = hopeless

    @classmethod
    def after(
        cls,
        call: PlacementCall,
        candidates: list[JobRequest],
        placed_at: int,
        held: set[GpuKey],
        hopeless: set[int],
    ) -> _Searched:
        placed = call.placed
        unplaced = tuple(request for request in candidates if request.key not in placed)
        start = placed_at - sum(1 for request in candidates[:placed_at] if request.key in placed)
        return cls(PlacedCluster(call), unplaced, start, frozenset(held), frozenset(hopeless))

    def still_holds(self, call: PlacementCall, candidates: list[JobRequest]) -> bool:
        """Whether `call` is on the cluster searched (`PlacedCluster.is_under`) and reads the jobs left
        unplaced first, in order."""
        if not self.cluster.is_under(call):
            return False
        unplaced = self._unplaced
        return len(candidates) >= len(unplaced) and all(map(operator.is_, candidates, unplaced))

    def covers(self, first: int, held: set[GpuKey]) -> bool:
        """Whether the jobs from `first` on were searched here with the same GPUs held (never from the
        head's window, which may hold GPUs back)."""
        return first > 0 and first >= self._start and held == self._held

    def whole_windows(self, first: int, lookahead: int) -> int:
        """How many positions of whole windows from `first` lie among the jobs searched."""
        return max(0, (len(self._unplaced) - first) // lookahead * lookahead)


def _signature(
    request: JobRequest,
) -> tuple[Workload, float, int, frozenset[str], int, int, int, frozenset[str]]:
    """What a verdict on a newcomer depends on: its workload, maxSlowdown and GPU count; and the nodes it
    avoids, the share, CPU and memory it states and its GPU types, for jobs alike are skipped alike once
    one fits nowhere."""
    return (
        request.workload,
        request.max_slowdown,
        request.gpus,
        request.avoid_nodes,
        request.gpu_milli,
        request.cpu_milli,
        request.host_memory_mib,
        request.gpu_products,
    )


def _a_wide_job_waits(call: PlacementCall, wide: list[JobRequest]) -> bool:
    """Whether a job of `wide` not placed yet asks more GPUs than any node has empty: it waits for one to
    drain."""
    most_empty = max(call.index.empty_counts(), default=0)
    return any(request.gpus > most_empty and request.key not in call.placed for request in wide)


def _over_limit(slowdown: float, max_slowdown: float, log_sd: float, limits: Limits) -> str:
    """Why a predicted slowdown is not admitted (`Limits.admits`)."""
    upper = limits.upper_end(slowdown, log_sd)
    if log_sd and slowdown <= max_slowdown / (1.0 + limits.qos_margin):
        return (
            f"predicted slowdown {slowdown:.2f}×, up to {upper:.2f}× while this GPU type is unproven, "
            f"over a maxSlowdown of {max_slowdown:g}×"
        )
    return f"predicted slowdown {slowdown:.2f}× over a maxSlowdown of {max_slowdown:g}×"
