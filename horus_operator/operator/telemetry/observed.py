"""Predicted vs observed: what the node agents measured for each DLJob, and the co-location dataset the
slowdown model retrains from. Pure; `handlers.py` feeds it watch events and writes the results.

Progress channel (docs/agent.md): a job patches its pod annotation `horus.dev/progress-steps-per-second`;
the agent copies it, per pod and GPU, into its GPUNode. For each job the operator then keeps, in
`status.observed`:
- `utilization` (mean of its GPUs' shares), `memoryMiB` (largest per GPU), `stepsPerSecond` (latest);
- `aloneStepsPerSecond`: the latest rate while no other job shared any of its GPUs;
- `sharedRuns[cotenant]`: the latest rate while sharing its GPU with exactly that one job, the GPU type,
  and `since`: when that co-tenancy began (online correction refuses a rate from before the job's
  current placement);
- `slowdown` = alone rate / current rate (1.0 when alone), when both are known.
A pair of jobs whose alone and shared rates are all known becomes one row of the co-location CSV
(`gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared`), the format
`horus train slowdown --data` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import fmean
from typing import Any

from horus_operator.api.defaults import SETTLED_S

CSV_HEADER = ("gpu", "model_a", "batch_a", "model_b", "batch_b", "tput_a_alone", "tput_b_alone",
              "tput_a_shared", "tput_b_shared")  # fmt: skip


@dataclass(frozen=True)
class PodOnGpu:
    """One pod's usage of one GPU, as a GPUNode reports it."""

    node: str
    gpu_index: int
    namespace: str
    job: str  # DLJob name
    utilization: float
    memory_mib: float
    steps_per_second: float | None

    @property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job}"


@dataclass(frozen=True)
class JobObservation:
    utilization: float
    memory_mib: float
    steps_per_second: float | None
    cotenants: tuple[str, ...]  # keys of the other jobs on any of its GPUs


@dataclass(frozen=True)
class PairSide:
    uid: str
    model: str
    batch_size: int
    alone: float
    shared: float


def pods_on_gpus(gpunode: Mapping[str, Any]) -> list[PodOnGpu]:
    """The DLJob pods a GPUNode lists (pods of no DLJob are left out)."""
    status = gpunode.get("status") or {}
    node = gpunode["metadata"]["name"]
    return [
        PodOnGpu(
            node=node,
            gpu_index=int(gpu["index"]),
            namespace=pod["namespace"],
            job=pod["job"],
            utilization=float(pod.get("utilization", 0.0)),
            memory_mib=float(pod.get("memoryMiB", 0.0)),
            steps_per_second=pod.get("stepsPerSecond"),
        )
        for gpu in status.get("gpus") or []
        for pod in gpu.get("pods") or []
        if pod.get("job")
    ]


def observe_jobs(entries: Sequence[PodOnGpu]) -> dict[str, JobObservation]:
    """Per job key, what one node's telemetry says about it."""
    by_gpu: dict[int, set[str]] = {}
    by_job: dict[str, list[PodOnGpu]] = {}
    for entry in entries:
        by_gpu.setdefault(entry.gpu_index, set()).add(entry.job_key)
        by_job.setdefault(entry.job_key, []).append(entry)
    observations = {}
    for key, own in by_job.items():
        cotenants = set().union(*(by_gpu[e.gpu_index] for e in own)) - {key}
        rates = [e.steps_per_second for e in own if e.steps_per_second]
        observations[key] = JobObservation(
            utilization=fmean(e.utilization for e in own),
            memory_mib=max(e.memory_mib for e in own),
            steps_per_second=rates[0] if rates else None,  # one pod per job: every GPU entry has the same
            cotenants=tuple(sorted(cotenants)),
        )
    return observations


def observed_status(
    observation: JobObservation,
    previous: Mapping[str, Any],
    *,
    gpu_type: str,
    now: datetime,
    settle_s: float = SETTLED_S,
) -> dict[str, Any]:
    """The job's new `status.observed`. Unknown fields are None, so a merge patch removes stale ones.

    A rate counts for the current co-tenancy only when it was reported during it: the job's annotation
    still holds the old rate for a while after a co-tenant arrives or leaves. So a rate is attributed
    when it differs from the one seen at the change, or after `settle_s` (`SETTLED_S` unless `horus run
    --observed-settle-seconds` says otherwise) in the same state (a job whose rate really did not
    change), or on the job's first observation.
    """
    cotenants = list(observation.cotenants)
    rate = observation.steps_per_second
    stamp = _stamp(now)
    first = not previous
    new_state = first or previous.get("sharingWith") != cotenants
    state_since = stamp if new_state else str(previous.get("stateSince") or stamp)
    rate_at_change = rate if new_state else previous.get("rateAtStateChange")
    settled = (now - _parse(state_since)).total_seconds() >= settle_s
    fresh = rate is not None and (first or rate != rate_at_change or settled)
    alone = previous.get("aloneStepsPerSecond")
    shared_runs = dict(previous.get("sharedRuns") or {})
    slowdown = None if new_state else previous.get("slowdown")
    if fresh and not cotenants:
        alone = rate
    elif fresh and len(cotenants) == 1:
        shared_runs[cotenants[0]] = {"gpu": gpu_type, "stepsPerSecond": rate, "since": state_since}
    if fresh and alone:
        slowdown = round(alone / rate, 4)
    return {
        "utilization": round(observation.utilization, 4),
        "memoryMiB": round(observation.memory_mib),
        "stepsPerSecond": rate,
        "aloneStepsPerSecond": alone,
        "slowdown": slowdown,
        "sharingWith": cotenants,
        "sharedRuns": shared_runs or None,
        "stateSince": state_since,  # since when `sharingWith` holds
        "rateAtStateChange": rate_at_change,
        "lastUpdate": stamp,
    }


def changed(new: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
    """Whether a write is worth it (a new timestamp alone is not)."""
    ignore = {"lastUpdate", "stateSince"}
    return {k: v for k, v in new.items() if k not in ignore and v is not None} != {
        k: v for k, v in previous.items() if k not in ignore and v is not None
    }


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def settled_alone(reported: Mapping[str, Any], now: datetime, *, settle_s: float = SETTLED_S) -> str | None:
    """The `stateSince` of the job's alone state once it has held `settle_s` (the agent's window then
    covers the alone period only: a first reading averages in time before the pod ran) and its
    utilization is known; None otherwise. Its utilization is then its busy fraction alone."""
    since = reported.get("stateSince")
    if reported.get("sharingWith") or reported.get("utilization") is None or not since:
        return None
    return str(since) if (now - _parse(str(since))).total_seconds() >= settle_s else None


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def pair_side(
    observed: Mapping[str, Any], cotenant: str, *, uid: str, model: str, batch_size: int
) -> PairSide | None:
    """One job's half of a co-location row with `cotenant`, when both of its rates are known."""
    run = (observed.get("sharedRuns") or {}).get(cotenant)
    alone = observed.get("aloneStepsPerSecond")
    if not run or not alone:
        return None
    return PairSide(
        uid=uid, model=model, batch_size=batch_size, alone=float(alone), shared=float(run["stepsPerSecond"])
    )


def pair_gpu(observed: Mapping[str, Any], cotenant: str) -> str:
    return str(((observed.get("sharedRuns") or {}).get(cotenant) or {}).get("gpu", ""))


def shared_since(observed: Mapping[str, Any], cotenant: str) -> datetime | None:
    """When the co-tenancy with `cotenant` that `sharedRuns` holds began; None where not recorded."""
    since = ((observed.get("sharedRuns") or {}).get(cotenant) or {}).get("since")
    return _parse(str(since)) if since else None


def pair_id(a: PairSide, b: PairSide) -> str:
    """Identifies one co-location of two job runs (DLJob UIDs), so it is recorded once."""
    return "+".join(sorted((a.uid, b.uid)))


def colocation_row(gpu: str, a: PairSide, b: PairSide) -> tuple[str, ...]:
    first, second = sorted((a, b), key=lambda side: (side.model, side.batch_size, side.uid))
    return (
        gpu,
        first.model,
        str(first.batch_size),
        second.model,
        str(second.batch_size),
        *(f"{value:.6g}" for value in (first.alone, second.alone, first.shared, second.shared)),
    )


# The dataset in size-capped chunks (ConfigMaps hold at most 1 MiB each).
@dataclass(frozen=True)
class Chunk:
    index: int
    rows: tuple[str, ...]  # CSV lines without the header
    pairs: tuple[str, ...]  # pair ids recorded in this chunk

    def size(self) -> int:
        return sum(len(r) + 1 for r in self.rows) + sum(len(p) + 1 for p in self.pairs)


def appended(chunks: Sequence[Chunk], row: Sequence[str], pair: str, *, max_bytes: int) -> tuple[Chunk, ...]:
    """The chunks after appending one row: into the newest chunk, or a new one when it would exceed
    `max_bytes`. Unchanged when `pair` is already recorded."""
    if any(pair in c.pairs for c in chunks):
        return tuple(chunks)
    line = ",".join(row)
    if chunks and chunks[-1].size() + len(line) + len(pair) + 2 <= max_bytes:
        last = chunks[-1]
        return (*chunks[:-1], Chunk(last.index, (*last.rows, line), (*last.pairs, pair)))
    next_index = chunks[-1].index + 1 if chunks else 0
    return (*chunks, Chunk(next_index, (line,), (pair,)))


def dropped_oldest(
    chunks: Sequence[Chunk], *, max_chunks: int
) -> tuple[tuple[Chunk, ...], tuple[Chunk, ...]]:
    """(kept, dropped): the cap on the whole dataset drops the oldest chunks first."""
    excess = max(0, len(chunks) - max_chunks)
    return tuple(chunks[excess:]), tuple(chunks[:excess])


def export_csv(chunks: Iterable[Chunk]) -> str:
    """The whole dataset as one CSV file, oldest rows first."""
    lines = [
        ",".join(CSV_HEADER),
        *(row for chunk in sorted(chunks, key=lambda c: c.index) for row in chunk.rows),
    ]
    return "\n".join(lines) + "\n"
