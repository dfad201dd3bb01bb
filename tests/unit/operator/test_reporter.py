"""The Reporter is the one writer of DLJob status: a write that must land before its caller acts (a
move, the telemetry's `observed`) waits for the job's background write in flight, so two writers never
race on one job."""

from __future__ import annotations

import asyncio
from typing import Any

from operator_builders import FakeKube

from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import reconcile
from horus_operator.operator.reports import Reporter
from horus_operator.testing.builders import DLJobBuilder


class SlowKube(FakeKube):
    """Records the order status patches land in; the first one waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.calls = 0
        self.landed: list[dict[str, Any]] = []

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any] | None:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
        self.landed.append(status)
        return await super().patch_status(namespace, name, status)


def test_an_awaited_write_lands_after_the_background_write_of_the_same_job() -> None:
    async def scenario() -> list[dict[str, Any]]:
        kube, cache = SlowKube(), ClusterCache()
        body = DLJobBuilder.stored("a", "ns").obj()
        kube.jobs["ns/a"] = body
        reporter = Reporter(kube=kube, cache=cache, concurrency=4)  # type: ignore[arg-type]
        reporter.write_later(body, reconcile.Decision(status={"phase": "Pending"}))
        awaited = asyncio.create_task(reporter.write(body, {"moves": [{"state": "Moving"}]}))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not awaited.done() and kube.calls == 1  # held behind the write in flight, not sent
        kube.release.set()
        stored = await awaited
        assert stored is not None and stored["status"] == {"phase": "Pending", "moves": [{"state": "Moving"}]}
        assert cache.jobs["ns/a"]["status"] == stored["status"]  # the cache keeps what was stored
        return kube.landed

    landed = asyncio.run(scenario())

    assert [sorted(patch) for patch in landed] == [["phase"], ["moves"]]


def test_a_write_waiting_for_its_turn_writes_the_newest_decision_once() -> None:
    """Behind a backlog a job's Scheduled and then Running become one write: the newest."""

    async def scenario() -> list[dict[str, Any]]:
        kube, cache = SlowKube(), ClusterCache()
        first, second = (DLJobBuilder.stored(name, "ns").obj() for name in ("first", "second"))
        kube.jobs.update({"ns/first": first, "ns/second": second})
        reporter = Reporter(kube=kube, cache=cache, concurrency=1)  # type: ignore[arg-type]
        reporter.write_later(first, reconcile.Decision(status={"phase": "Queued"}))  # holds the one lane
        for phase in ("Scheduled", "Running"):
            reporter.write_later(second, reconcile.Decision(status={"phase": phase}))
        kube.release.set()
        await reporter.settle()
        return kube.landed

    assert asyncio.run(scenario()) == [{"phase": "Queued"}, {"phase": "Running"}]
