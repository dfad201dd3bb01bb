"""What the operator tells users: DLJob status writes and Events. The one writer of DLJob status.

Three components write status, all through a `Reporter`: the scheduling loop (phase, conditions,
placement, message; in the background, `write_later`), a move (`status.moves`, awaited before the old
pod is deleted: `write`) and the telemetry handler (`observed`, which it alone owns: `write`). Each
write keeps the cache current with what the API server stored, since the loop decides against the
cache and a stale copy would make it write again.

Pod creation is the critical path of a burst, so reports never hold up a cycle: at most
`concurrency` writes and Events are in flight at once, and one status write per job at a time, in
order (a job re-decided while its write is in flight is marked dirty again once the write lands). A
write still waiting for its turn writes the job's newest decision when it goes: behind a backlog
(10,000 jobs placed in a burst) a job's Scheduled and Running are one write, not two.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from horus_operator.operator import status
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import reconcile
from horus_operator.operator.kube import Kube
from horus_operator.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)


def needs_write(body: Mapping[str, Any], decision: reconcile.Decision) -> bool:
    return decision.status != (body.get("status") or {})


class Reporter:
    def __init__(
        self, *, kube: Kube, cache: ClusterCache, concurrency: int, metrics: OperatorMetrics | None = None
    ) -> None:
        self._kube, self._cache = kube, cache
        self._metrics = metrics or OperatorMetrics()
        self._events: set[asyncio.Task[None]] = set()  # Events being posted
        self._writing: dict[str, asyncio.Task[Any]] = {}  # job key -> its status write in flight
        # job key -> the newest decision to write, while its write waits for its turn (in `_writing` too)
        self._waiting: dict[str, tuple[Mapping[str, Any], reconcile.Decision]] = {}
        self._rewrite: set[str] = set()  # jobs re-decided while a write was in flight
        self._reporting = asyncio.Semaphore(concurrency)

    def write_later(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        """Write a status without holding up the next cycle. One write per job at a time, in order: while
        one is in flight the job is re-decided once it lands (against the status it stored)."""
        key = _key(body)
        if key in self._waiting:  # its write has not gone yet: it takes this newer decision
            self._waiting[key] = (body, decision)
            return
        if key in self._writing:
            self._rewrite.add(key)
            return
        self._waiting[key] = (body, decision)
        task = asyncio.create_task(self._apply(key))
        self._writing[key] = task
        task.add_done_callback(lambda done: self._written(key, done))

    async def write(self, body: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any] | None:
        """Merge-patch `body`'s status now, after any write of the job in flight; the DLJob as stored,
        None when it was deleted meanwhile. For writers that must know it landed before they act."""
        key = _key(body)
        while (in_flight := self._writing.get(key)) is not None:
            await asyncio.wait({in_flight})
        task = asyncio.create_task(self._patch_now(body, patch))
        self._writing[key] = task
        task.add_done_callback(lambda done: self._written(key, done))
        return await task

    def post_later(self, body: Mapping[str, Any], *, kind: str, reason: str, message: str) -> None:
        """Post an Event without holding up the cycle (Events are best effort)."""
        task = asyncio.create_task(self._post_event(body, kind=kind, reason=reason, message=message))
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def settle(self) -> None:
        """Wait for the status writes and Events in flight (tests, shutdown)."""
        await asyncio.gather(*self._writing.values(), *self._events, return_exceptions=True)

    def _written(self, key: str, task: asyncio.Task[Any]) -> None:
        self._writing.pop(key, None)
        self._waiting.pop(key, None)  # a write cancelled before its turn
        failed = not task.cancelled() and task.exception() is not None
        if failed:
            log.warning("status write for %s failed (retried): %s", key, task.exception())
            self._metrics.retried("status_write")
        if failed or key in self._rewrite:
            self._rewrite.discard(key)
            self._cache.mark([key])

    async def _apply(self, key: str) -> None:
        async with self._reporting:
            body, decision = self._waiting.pop(key)
            await self._write_status(body, decision)

    async def _patch_now(self, body: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any] | None:
        async with self._reporting:
            return await self._patch(body, patch)

    async def _patch(self, body: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = body["metadata"]
        stored = await self._kube.patch_status(meta["namespace"], meta["name"], patch)
        if stored is not None:
            self._cache.store_job(stored)
        return stored

    async def _write_status(self, body: Mapping[str, Any], decision: reconcile.Decision) -> None:
        current = body.get("status") or {}
        if decision.status != current:
            await self._patch(body, status.loop_patch(current, decision.status))
            if (
                decision.status.get("phase") == "Failed"
                and (body.get("status") or {}).get("phase") != "Failed"
            ):
                self.post_later(body, kind="Warning", reason="Failed", message=decision.status["message"])

    async def _post_event(self, body: Mapping[str, Any], *, kind: str, reason: str, message: str) -> None:
        async with self._reporting:
            await self._kube.post_event(body, kind=kind, reason=reason, message=message)


def _key(body: Mapping[str, Any]) -> str:
    return f"{body['metadata']['namespace']}/{body['metadata']['name']}"
