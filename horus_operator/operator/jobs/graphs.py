"""Model graphs read off the scheduling loop: a DLJob whose model is an ONNX graph waits while its graph
is parsed in the background, and the loop places everyone else meanwhile.

Parsing a graph is CPU work proportional to its size (a 1 MB graph of 40,000 nodes takes about a
second; 15 of them held every other job for 17 s when the loop parsed them inline). So:

- `GraphReader` parses in a separate process (`ProcessPoolExecutor`, `workers` at a time: counting
  features holds the GIL, and a thread would still slow the loop), and keeps the features of each graph
  by the hash of its bytes and the batch size, so a graph shared by many jobs, or a job re-decided after
  a restart, is parsed once.
- `GraphQueue` runs at most `per_namespace` parses of one namespace at once, so one tenant's burst of
  graphs waits behind its own parses, not in front of other namespaces'.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import multiprocessing
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor

from horus_operator.api.dljob import InvalidJob, JobSpec
from horus_operator.prediction.api import Workload

log = logging.getLogger(__name__)

Features = Callable[[bytes, int], Mapping[str, float]]


def onnx_features(data: bytes, batch_size: int) -> dict[str, float]:
    """A `GraphReader`'s work, run in its worker process (top level, so that it pickles; in this light
    module, so that the worker imports little). `graph_profile` imports onnx, about a second: imported
    where a DLJob's own graph is read, not at the operator's start-up."""
    from horus_operator.prediction import graph_profile

    return graph_profile.from_onnx(data, batch_size)


class GraphReader:
    """`onnx_features` for the `WorkloadResolver`: features computed in a worker process, remembered by
    content. Called from a thread (the resolver runs off the loop); blocks that thread only."""

    def __init__(self, features: Features, *, workers: int = 1, capacity: int = 256) -> None:
        self._features, self._workers, self._capacity = features, workers, capacity
        self._known: OrderedDict[tuple[str, int], Mapping[str, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: Executor | None = None

    def __call__(self, data: bytes, batch_size: int) -> Mapping[str, float]:
        key = (hashlib.sha256(data).hexdigest(), batch_size)
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                return self._known[key]
        features = self._executor().submit(self._features, data, batch_size).result()
        with self._lock:
            self._known[key] = features
            while len(self._known) > self._capacity:
                self._known.popitem(last=False)
        return features

    def _executor(self) -> Executor:
        """Started on the first graph: an operator whose jobs name catalog models never starts one.
        Spawned, not forked: the operator's threads (kopf, the API client) must not be copied midway."""
        with self._lock:
            if self._pool is None:
                context = multiprocessing.get_context("spawn")
                self._pool = ProcessPoolExecutor(max_workers=self._workers, mp_context=context)
            return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


Verdict = Workload | InvalidJob


class GraphQueue:
    """Resolves ONNX-described jobs in the background, at most `per_namespace` of a namespace at once;
    `done(job key)` is called as each verdict is ready (the loop re-decides that job)."""

    def __init__(
        self,
        resolve: Callable[[JobSpec], Awaitable[Verdict]],
        done: Callable[[str], None],
        *,
        per_namespace: int = 2,
    ) -> None:
        self._resolve, self._done, self._per_namespace = resolve, done, per_namespace
        self._limits: defaultdict[str, asyncio.Semaphore] = defaultdict(self._namespace_limit)
        self._verdicts: dict[tuple[str, int], Verdict] = {}  # (uid, generation) -> verdict
        self._running: dict[tuple[str, int], asyncio.Task[None]] = {}

    def _namespace_limit(self) -> asyncio.Semaphore:
        return asyncio.Semaphore(self._per_namespace)

    def verdict(self, job: JobSpec) -> Verdict | None:
        """The job's workload or why it cannot run; None while its graph is being read (it is then
        started, once)."""
        key = (job.uid, job.generation)
        if key in self._verdicts:
            return self._verdicts.pop(key)  # the caller keeps it with its other verdicts
        if key not in self._running:
            self._running[key] = asyncio.create_task(self._read(job, key), name=f"graph {job.key}")
        return None

    async def _read(self, job: JobSpec, key: tuple[str, int]) -> None:
        verdict: Verdict
        try:
            async with self._limits[job.namespace]:
                verdict = await self._resolve(job)
        except InvalidJob as invalid:
            verdict = invalid
        except Exception:  # the API server, not the graph: read again at the job's next re-decision
            log.warning("reading the model graph of %s failed; retrying later", job.key, exc_info=True)
            return
        finally:
            self._running.pop(key, None)
        self._verdicts[key] = verdict
        self._done(job.key)

    @property
    def reading(self) -> int:
        """Jobs whose graph or config is being read now."""
        return len(self._running)

    def cancel(self) -> None:
        for task in self._running.values():
            task.cancel()
        self._running.clear()
