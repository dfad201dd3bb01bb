"""`reserve`: a reservation pod per GPU slot asks NVIDIA's device plugin for the GPU (`reservations.py`);
the job's pods get the UUID it reports. Level-triggered like DRA's claims: what is wanted is recomputed
from the cache (the reserve-bound pods holding GPUs, and the placements awaiting a reservation), and a
cycle deletes what is not (`reservations.to_delete`); a crash in between leaves nothing a later cycle
does not repair."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from horus_operator.api import keys
from horus_operator.api.dljob import Binding
from horus_operator.operator.binding import Bound, reservations
from horus_operator.operator.binding.reservations import ReservationSettings, Slot
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.kube import Kube
from horus_operator.placement.types import Assignment

log = logging.getLogger(__name__)


class ReserveBinder:
    def __init__(
        self, *, kube: Kube, cache: ClusterCache, settings: ReservationSettings, clock: Callable[[], datetime]
    ) -> None:
        self._kube, self._cache, self._settings, self._clock = kube, cache, settings, clock
        self._awaiting: dict[Slot, datetime] = {}  # slots of placements whose pods wait for a reservation

    async def prepare(self, placed: Sequence[Bound]) -> None:
        """A reservation for every slot of the cycle's placements that has none (co-tenants reuse one)."""
        now = self._clock()
        for bound in placed:
            node = bound.assignment.node
            for index in bound.assignment.gpu_indices:
                slot = (node, index)
                self._awaiting.setdefault(slot, now)
                if reservations.name(slot) not in self._cache.reservations:
                    await self._create(slot)

    def unready(self, assignment: Assignment, uuids: Sequence[str | None]) -> str | None:
        for index in assignment.gpu_indices:
            reservation = self._cache.reservations.get(reservations.name((assignment.node, index)))
            if reservation is None or not reservation.ready:
                where = (
                    f"{reservations.name((assignment.node, index))} in namespace {keys.RESERVATION_NAMESPACE}"
                )
                return f"waiting: reservation pod {where} has not reported its GPU yet"
        return None

    def gpu_uuids(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str | None, ...]:
        """The GPUs the device plugin gave the slots' reservations, not the ones Horus's books number."""
        held = self._cache.reservations
        return tuple(
            (held[reservations.name((assignment.node, i))].uuid or None) for i in assignment.gpu_indices
        )

    def pod_claims(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return ()

    async def repair(self, changed: bool) -> None:
        """Delete the reservations no pod holds and no placement awaits, those that ended, and those that
        never reported their GPU (a placement that still wants the slot makes it again)."""
        now = self._clock()
        timeout = self._settings.report_timeout_s
        held = {
            (pod.node, index)
            for pod in self._cache.all_pods()
            if pod.binding == Binding.RESERVE and pod.holds_gpus
            for index in pod.gpu_indices
        }
        # A placement waits for its slot until its pod holds it, or the report timeout passes.
        self._awaiting = {
            slot: since
            for slot, since in self._awaiting.items()
            if slot not in held and (now - since).total_seconds() <= timeout
        }
        existing = self._cache.reservations.values()
        for doomed in reservations.to_delete(existing, held | set(self._awaiting), now, timeout):
            log.info(
                "deleting reservation pod %s/%s (%s)",
                keys.RESERVATION_NAMESPACE,
                doomed.name,
                _why(doomed, held),
            )
            self._awaiting.pop(doomed.slot, None)
            await self._kube.delete_pod(keys.RESERVATION_NAMESPACE, doomed.name)
            self._cache.deleted_reservation(doomed.name)

    def refresh(self) -> None:
        return None

    def taken(self) -> Mapping[str, str]:
        return {}

    async def _create(self, slot: Slot) -> None:
        view = self._cache.node_views.get(slot[0])
        if view is None:
            return
        stored, _ = await self._kube.create_pod(reservations.body(slot, view.hostname, self._settings))
        self._cache.put_reservation(stored)


def _why(reservation: reservations.ReservationView, held: set[Slot]) -> str:
    if reservation.phase in reservations.ENDED:
        return f"it is {reservation.phase}"
    if not reservation.uuid:
        return "it never reported its GPU"
    return "no pod holds its GPU" if reservation.slot not in held else "replaced"
