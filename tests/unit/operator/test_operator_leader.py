"""Lease election: of two replicas only one leads; the other takes over once the lease expires."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException

from horus_operator.operator.leader import LeaderElector, LeaseConfig


class FakeLeases:
    """coordination.k8s.io leases with the API server's compare-and-swap on resourceVersion."""

    def __init__(self) -> None:
        self.lease: Any = None
        self.version = 0

    def read_namespaced_lease(self, name: str, namespace: str) -> Any:
        if self.lease is None:
            raise ApiException(status=404)
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace: str, body: Any) -> None:
        if self.lease is not None:
            raise ApiException(status=409)
        self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any) -> None:
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            raise ApiException(status=409)
        self._store(body)

    def _store(self, body: Any) -> None:
        self.version += 1
        body.metadata.resource_version = str(self.version)
        self.lease = copy.deepcopy(body)


class FakeKube:
    def __init__(self, leases: FakeLeases) -> None:
        self.coordination = leases


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _elector(leases: FakeLeases, identity: str, clock: Clock) -> LeaderElector:
    config = LeaseConfig(namespace="horus-system", identity=identity, duration=timedelta(seconds=15))
    return LeaderElector(FakeKube(leases), config, clock=clock)  # type: ignore[arg-type]


def test_only_one_replica_holds_the_lease_until_it_expires() -> None:
    leases, clock = FakeLeases(), Clock()
    first, second = _elector(leases, "a", clock), _elector(leases, "b", clock)
    assert first._try_acquire() is True
    assert second._try_acquire() is False
    clock.now += timedelta(seconds=10)
    assert first._try_acquire() is True  # renewal
    clock.now += timedelta(seconds=10)
    assert second._try_acquire() is False  # renewed 10 s ago: still valid
    clock.now += timedelta(seconds=20)
    assert second._try_acquire() is True  # "a" went silent
    assert leases.lease.spec.holder_identity == "b"
    assert leases.lease.spec.lease_transitions == 1
    assert first._try_acquire() is False


def test_a_restarted_replica_with_the_same_identity_takes_its_lease_back_at_once() -> None:
    leases, clock = FakeLeases(), Clock()
    assert _elector(leases, "a", clock)._try_acquire() is True
    assert _elector(leases, "a", clock)._try_acquire() is True
