"""Leader election on a coordination.k8s.io Lease: of several operator replicas only the holder places
pods and writes status, so two replicas never both place. The others keep their caches warm.

A replica that cannot take part (say, the Lease's namespace does not exist: an operator run locally
against a cluster with only the CRDs) says why in one warning line, retries quietly (debug level) and
says once when it is over; `not_leading` carries the reason to the health endpoint meanwhile."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from horus_operator.operator.apierrors import ApiError, ApiUnavailable, NamespaceMissing
from horus_operator.operator.kube import Kube, Lease
from horus_operator.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)

# What a lease step may fail with and still be retried.
RETRIED = (ApiError, ApiUnavailable)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str = "horus-operator"
    identity: str = "horus"
    # A standby takes over within a duration of the holder's death (failover <= 15 s, bench/chaos.py);
    # five renewals per duration ride out a slow API server before the holder loses the Lease.
    duration: timedelta = timedelta(seconds=10)
    renew_every: float = 2.0


@dataclass(frozen=True)
class Trouble:
    """Why lease steps fail. Failures with the same `key` are one trouble going on, even when their
    messages differ in detail, so it is logged once."""

    key: str
    message: str  # one line: what is wrong and the way out
    over: str  # logged once when a step succeeds again


def trouble_of(error: ApiError | ApiUnavailable, config: LeaseConfig) -> Trouble:
    lease = f"lease {config.namespace}/{config.name}"
    if isinstance(error, NamespaceMissing):
        return namespace_missing(config)
    if isinstance(error, ApiError):  # status and reason only: the body may be a multi-line dump
        return Trouble(
            f"api-{error.status}",
            f"{lease}: the API server answered {error.status} {error.reason}; not leading, retrying",
            f"{lease}: the API server answers again",
        )
    return Trouble(
        "unreachable",
        f"{lease}: API server unreachable ({error.cause}); not leading, retrying",
        f"{lease}: the API server is reachable again",
    )


def namespace_missing(config: LeaseConfig) -> Trouble:
    """One line that names the namespace and both ways out: create it, or point the operator elsewhere."""
    namespace = config.namespace
    return Trouble(
        "namespace-missing",
        f"lease {namespace}/{config.name}: namespace {namespace} does not exist, so this replica cannot "
        "lead and places nothing. Create it (`kubectl apply -k manifests/` installs it with the rest of "
        f"Horus; `kubectl create namespace {namespace}` only it) or run with --lease-namespace "
        f"(HORUS_LEASE_NAMESPACE) naming an existing namespace. Retrying every {config.renew_every:g}s.",
        f"lease {namespace}/{config.name}: namespace {namespace} exists now; competing for the lease",
    )


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        config: LeaseConfig,
        clock: Callable[[], datetime] | None = None,
        metrics: OperatorMetrics | None = None,
    ) -> None:
        self._kube = kube
        self._metrics = metrics or OperatorMetrics()
        self._config = config
        self._clock = clock or (lambda: datetime.now(UTC))
        self.leading = asyncio.Event()
        self.not_leading: str | None = "no lease step yet"  # why not, for the health endpoint
        self._trouble: Trouble | None = None

    async def run(self) -> None:
        """Acquire and renew forever; `leading` is set while this replica holds the lease."""
        while True:
            await self.step()
            await asyncio.sleep(self._config.renew_every)

    async def step(self) -> None:
        """One acquire-or-renew. A failed one counts as not holding the lease: stop placing until it is back
        (another replica may take over once the lease expires)."""
        try:
            held = await self._kube.call(self._try_acquire)
        except RETRIED as error:
            self._report(trouble_of(error, self._config))
            self._metrics.retried("lease")
            held = False
        else:
            self._report_over()
            self.not_leading = None if held else self._standby()
        self._follow(held)

    def _standby(self) -> str:
        return f"another replica holds lease {self._config.namespace}/{self._config.name}"

    def _follow(self, held: bool) -> None:
        self._metrics.leading(held)
        if held and not self.leading.is_set():
            log.info("lease %s acquired by %s", self._config.name, self._config.identity)
            self.leading.set()
        elif not held and self.leading.is_set():
            log.warning("lease %s lost", self._config.name)
            self.leading.clear()

    def _report(self, trouble: Trouble) -> None:
        """A warning for the first failure of a kind; the retries, every few seconds, only at debug level."""
        self.not_leading = trouble.message
        if self._trouble is not None and self._trouble.key == trouble.key:
            log.debug("%s", trouble.message)
            return
        self._trouble = trouble
        log.warning("%s", trouble.message)

    def _report_over(self) -> None:
        if self._trouble is not None:
            log.info("%s", self._trouble.over)
            self._trouble = None

    def _try_acquire(self) -> bool:
        kube, config, now = self._kube, self._config, self._clock()
        lease = kube.read_lease(config.namespace, config.name)
        duration = int(config.duration.total_seconds())
        if lease is None:
            new = Lease(holder=config.identity, duration_seconds=duration, acquired=now, renewed=now)
            return kube.create_lease(config.namespace, config.name, new)
        renewed = lease.renewed or lease.acquired
        expired = renewed is None or now - renewed > timedelta(seconds=lease.duration_seconds)
        if lease.holder not in (config.identity, None, "") and not expired:
            return False
        if lease.holder != config.identity:
            lease = dataclasses.replace(lease, acquired=now, transitions=lease.transitions + 1)
        renewal = dataclasses.replace(lease, holder=config.identity, renewed=now, duration_seconds=duration)
        # `lease.version` makes this a compare-and-swap against another replica
        return kube.replace_lease(config.namespace, config.name, renewal)
