"""The watch handlers that feed the cache: each is a coroutine, so kopf runs it on the event loop between
the scheduling loop's own steps (a plain function runs in kopf's thread pool, where a put raced a resync
and a finished pod stayed Running in the cache: seen in `make chaos`, two-replicas)."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import kopf

import horus_operator.operator.dra.handlers  # noqa: F401  (registers the DRA handlers)
from horus_operator.operator import handlers
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.podroute import handlers as _podroute_handlers  # noqa: F401  (the pod route's)
from horus_operator.operator.telemetry import handlers as _telemetry_handlers  # noqa: F401  (GPUNodes)
from horus_operator.testing.builders import DLJobBuilder


def test_every_watch_handler_runs_on_the_event_loop() -> None:
    watching = kopf.get_default_registry()._watching.get_all_handlers()
    ids = {handler.id for handler in watching}
    assert {
        "dljob_changed",
        "pod_changed",
        "node_changed",
        "volume_claim_changed",
        "claim_changed",
        "slice_changed",
        "managed_pod_changed",
    } <= ids
    assert [h.id for h in watching if not inspect.iscoroutinefunction(h.fn)] == []


def test_no_handler_reads_the_diff_base_that_is_not_kept() -> None:
    """`handlers.NoDiffBase` keeps no last-handled state: right only while no handler detects changes."""
    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    assert handlers.NoDiffBase().build(body=kopf.Body({"spec": {"a": 1}})) == {}


def test_a_mirror_puts_then_drops() -> None:
    cache = ClusterCache()
    memo = SimpleNamespace(runtime=SimpleNamespace(cache=cache))
    job = DLJobBuilder("a").obj()
    job["metadata"]["namespace"] = "team"
    changed = handlers.mirror(ClusterCache.put_job, ClusterCache.drop_job)

    asyncio.run(changed(event={"type": "ADDED", "object": job}, memo=memo))
    assert list(cache.jobs) == ["team/a"]
    asyncio.run(changed(event={"type": "DELETED", "object": job}, memo=memo))
    assert cache.jobs == {}
