"""Lease election: of two replicas only one leads; the other takes over once the lease expires. A lease
namespace that does not exist is said once, in one line, and served by the health endpoint."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from horus_operator.operator.apierrors import ApiError, ApiUnavailable, NamespaceMissing
from horus_operator.operator.kube import Lease
from horus_operator.operator.leader import LeaderElector, LeaseConfig

T = TypeVar("T")


class FakeKube:
    """The lease calls of our `Kube` adapter, with the API server's compare-and-swap on resourceVersion,
    and namespaces that may not exist."""

    def __init__(self, namespaces: set[str] | None = None) -> None:
        self.namespaces = {"horus-system"} if namespaces is None else namespaces
        self.lease: Lease | None = None
        self.version = 0
        self.failure: Exception | None = None  # raised by every call while set

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(*args)

    def read_lease(self, namespace: str, name: str) -> Lease | None:
        self._fail()
        return self.lease

    def create_lease(self, namespace: str, name: str, lease: Lease) -> bool:
        self._fail()
        if namespace not in self.namespaces:
            raise NamespaceMissing(namespace)
        if self.lease is not None:
            return False
        self._store(lease)
        return True

    def replace_lease(self, namespace: str, name: str, lease: Lease) -> bool:
        self._fail()
        if self.lease is None or lease.version != self.lease.version:
            return False
        self._store(lease)
        return True

    def _fail(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _store(self, lease: Lease) -> None:
        self.version += 1
        self.lease = dataclasses.replace(lease, version=str(self.version))


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _elector(kube: FakeKube, identity: str, clock: Clock, namespace: str = "horus-system") -> LeaderElector:
    config = LeaseConfig(namespace=namespace, identity=identity, duration=timedelta(seconds=15))
    return LeaderElector(kube, config, clock=clock)  # type: ignore[arg-type]


def _steps(elector: LeaderElector, count: int) -> None:
    for _ in range(count):
        asyncio.run(elector.step())


def _lease_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.endswith(".leader") and r.levelno == level]


def test_only_one_replica_holds_the_lease_until_it_expires() -> None:
    kube, clock = FakeKube(), Clock()
    first, second = _elector(kube, "a", clock), _elector(kube, "b", clock)
    assert first._try_acquire() is True
    assert second._try_acquire() is False
    clock.now += timedelta(seconds=10)
    assert first._try_acquire() is True  # renewal
    clock.now += timedelta(seconds=10)
    assert second._try_acquire() is False  # renewed 10 s ago: still valid
    clock.now += timedelta(seconds=20)
    assert second._try_acquire() is True  # "a" went silent
    assert kube.lease is not None
    assert (kube.lease.holder, kube.lease.transitions) == ("b", 1)
    assert first._try_acquire() is False


def test_a_restarted_replica_with_the_same_identity_takes_its_lease_back_at_once() -> None:
    kube, clock = FakeKube(), Clock()
    assert _elector(kube, "a", clock)._try_acquire() is True
    assert _elector(kube, "a", clock)._try_acquire() is True


def test_the_standby_says_another_replica_leads() -> None:
    kube, clock = FakeKube(), Clock()
    first, second = _elector(kube, "a", clock), _elector(kube, "b", clock)
    _steps(first, 1)
    _steps(second, 1)
    assert first.leading.is_set() and first.not_leading is None
    assert not second.leading.is_set()
    assert second.not_leading == "another replica holds lease horus-system/horus-operator"


def test_a_missing_lease_namespace_is_said_once_in_one_line_with_both_ways_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="horus_operator.operator.leader")
    elector = _elector(FakeKube(namespaces=set()), "a", Clock(), namespace="horus-system")
    _steps(elector, 5)
    (warning,) = _lease_lines(caplog, logging.WARNING)
    assert "\n" not in warning
    assert "namespace horus-system does not exist" in warning
    assert "kubectl apply -k manifests/" in warning and "--lease-namespace" in warning
    assert len(_lease_lines(caplog, logging.DEBUG)) == 4  # the retries: quiet
    assert not elector.leading.is_set()
    assert elector.not_leading == warning  # what the health endpoint serves


def test_a_lease_namespace_created_later_is_said_once_and_the_replica_leads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="horus_operator.operator.leader")
    kube = FakeKube(namespaces=set())
    elector = _elector(kube, "a", Clock())
    _steps(elector, 3)
    kube.namespaces.add("horus-system")
    _steps(elector, 3)
    assert elector.leading.is_set() and elector.not_leading is None
    infos = _lease_lines(caplog, logging.INFO)
    assert infos == [
        "lease horus-system/horus-operator: namespace horus-system exists now; competing for the lease",
        "lease horus-operator acquired by a",
    ]
    assert len(_lease_lines(caplog, logging.WARNING)) == 1


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (ApiError(503, "Service Unavailable", "{...}"), "answered 503 Service Unavailable"),
        (ApiUnavailable("ConnectionRefusedError"), "unreachable (ConnectionRefusedError)"),
    ],
)
def test_a_failing_api_server_is_said_once_without_the_http_dump(
    caplog: pytest.LogCaptureFixture, failure: Exception, said: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="horus_operator.operator.leader")
    kube = FakeKube()
    elector = _elector(kube, "a", Clock())
    _steps(elector, 1)
    kube.failure = failure
    _steps(elector, 4)
    assert not elector.leading.is_set()  # stop placing while the lease cannot be renewed
    warnings = _lease_lines(caplog, logging.WARNING)
    (trouble,) = [line for line in warnings if line != "lease horus-operator lost"]
    assert len(warnings) == 2
    assert said in trouble and "\n" not in trouble
    kube.failure = None
    _steps(elector, 1)
    assert elector.leading.is_set()
