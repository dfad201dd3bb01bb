"""Leader election on a coordination.k8s.io Lease: of several operator replicas only the holder places
pods and writes status, so two replicas never both place. The others keep their caches warm."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import kubernetes
from kubernetes.client.exceptions import ApiException

from horus_operator.operator.kube import Kube

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str = "horus-operator"
    identity: str = "horus"
    duration: timedelta = timedelta(seconds=15)
    renew_every: float = 3.0


class LeaderElector:
    def __init__(self, kube: Kube, config: LeaseConfig, clock: Callable[[], datetime] | None = None) -> None:
        self._kube = kube
        self._config = config
        self._clock = clock or (lambda: datetime.now(UTC))
        self.leading = asyncio.Event()

    async def run(self) -> None:
        """Acquire and renew forever; `leading` is set while this replica holds the lease."""
        while True:
            try:
                held = await self._kube.call(self._try_acquire)
            except (ApiException, OSError) as error:  # API server unreachable: stop placing until it is back
                log.warning("lease %s: %s", self._config.name, error)
                held = False
            if held and not self.leading.is_set():
                log.info("lease %s acquired by %s", self._config.name, self._config.identity)
                self.leading.set()
            elif not held and self.leading.is_set():
                log.warning("lease %s lost", self._config.name)
                self.leading.clear()
            await asyncio.sleep(self._config.renew_every)

    def _try_acquire(self) -> bool:
        api = self._kube.coordination
        config, now = self._config, self._clock()
        try:
            lease = api.read_namespaced_lease(config.name, config.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        spec = lease.spec
        holder = spec.holder_identity
        renewed = spec.renew_time or spec.acquire_time
        expired = renewed is None or now - renewed > timedelta(seconds=spec.lease_duration_seconds or 0)
        if holder not in (config.identity, None, "") and not expired:
            return False
        if holder != config.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = config.identity
        spec.renew_time = now
        spec.lease_duration_seconds = int(config.duration.total_seconds())
        try:  # resourceVersion in `lease` makes this a compare-and-swap against another replica
            api.replace_namespaced_lease(config.name, config.namespace, lease)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def _create(self, now: datetime) -> bool:
        config = self._config
        body = kubernetes.client.V1Lease(
            metadata=kubernetes.client.V1ObjectMeta(name=config.name, namespace=config.namespace),
            spec=kubernetes.client.V1LeaseSpec(
                holder_identity=config.identity,
                lease_duration_seconds=int(config.duration.total_seconds()),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._kube.coordination.create_namespaced_lease(config.namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True
