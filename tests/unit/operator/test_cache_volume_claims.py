"""The cache's PersistentVolumeClaim names (what jobs/volumes.py asks before a job is placed), fed by the
watch and by a resync's list like every other kind."""

from __future__ import annotations

import asyncio

from operator_builders import FakeKube
from test_operator_loop import _loop

from horus_operator.operator.cache import ClusterCache
from horus_operator.testing.builders import DLJobBuilder


def _claim(name: str, namespace: str = "team-a", version: str = "5", deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": namespace, "resourceVersion": version}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    return {"metadata": meta, "spec": {}}


def test_a_claim_coming_or_going_re_decides_its_namespaces_jobs_only() -> None:
    cache = ClusterCache()
    for name, namespace in (("a", "team-a"), ("b", "team-b")):
        cache.store_job(DLJobBuilder.stored(name, namespace=namespace).obj())
    cache.put_volume_claim(_claim("data"))
    assert cache.has_volume_claim("team-a", "data") and not cache.has_volume_claim("team-b", "data")
    assert cache.take_dirty() == {"team-a/a"}
    cache.put_volume_claim(_claim("data", version="6"))  # its status changed: nothing to re-decide
    assert cache.take_dirty() == set()
    cache.put_volume_claim(_claim("data", version="7", deleting=True))  # kube-scheduler refuses it now
    assert not cache.has_volume_claim("team-a", "data")
    assert cache.take_dirty() == {"team-a/a"}
    cache.drop_volume_claim(_claim("data", version="8"))
    assert cache.take_dirty() == set()


class ClaimDeletedDuringTheLists(FakeKube):
    """The watch delivers a claim's deletion while the resync's lists are in flight."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__()
        self.cache = cache

    async def list_nodes(self) -> list[dict]:
        self.cache.drop_volume_claim(_claim("deleted", version="4"))
        return []


def test_a_resync_lists_the_claims_and_a_claim_deleted_meanwhile_stays_gone() -> None:
    cache = ClusterCache()
    cache.put_volume_claim(_claim("gone-before"))  # deleted while this replica was not watching
    kube = ClaimDeletedDuringTheLists(cache)
    kube.volume_claims = [_claim("kept"), _claim("deleted", version="3"), _claim("going", deleting=True)]
    asyncio.run(_loop(kube, cache).resync())
    assert sorted(cache.volume_claims) == ["team-a/kept"]
