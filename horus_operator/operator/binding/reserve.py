"""`reserve`: a reservation pod per GPU slot asks NVIDIA's device plugin for the GPU (`reservations.py`);
the job's pods get the UUID it reports (in NVIDIA_VISIBLE_DEVICES, or a CDI device annotation).
Level-triggered like DRA's claims: what is wanted is recomputed from the cache (the reserve-bound pods
holding GPUs, DLJobs' and the pod route's, and the placements awaiting a reservation), and a cycle
deletes what is not (`reservations.to_delete`); a crash in between leaves nothing a later cycle does not
repair."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime

from horus_operator.api import keys
from horus_operator.api.dljob import Binding
from horus_operator.operator.binding import Bound, reservations
from horus_operator.operator.binding.reservations import DeviceMode, ReservationSettings, Slot
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs.pods import INVOLVED_POD, PodView, cdi_device
from horus_operator.operator.kube import Kube
from horus_operator.placement.types import Assignment

log = logging.getLogger(__name__)
RESERVATIONS = keys.RESERVATION_NAMESPACE
LOST = "ReservationLost"


class ReserveBinder:
    def __init__(
        self,
        *,
        kube: Kube,
        cache: ClusterCache,
        settings: ReservationSettings,
        clock: Callable[[], datetime],
        routed: Callable[[], Iterable[PodView]] = tuple,
    ) -> None:
        """`routed`: the pods the pod route released, which hold their slots as a DLJob's pods do."""
        self._kube, self._cache, self._settings, self._clock = kube, cache, settings, clock
        self._routed = routed
        self._awaiting: dict[Slot, datetime] = {}  # slots of placements whose pods wait for a reservation
        self._elsewhere: dict[Slot, datetime] = {}  # slots the device plugin had no GPU for, and since when

    async def prepare(self, placed: Sequence[Bound]) -> None:
        """A reservation for every slot of the cycle's placements that has none (co-tenants reuse one),
        all requested at once: one after another, a burst's creations held the cycle for tens of seconds
        on a loaded API server."""
        now = self._clock()
        slots = dict.fromkeys((b.assignment.node, i) for b in placed for i in b.assignment.gpu_indices)
        for slot in slots:
            self._awaiting.setdefault(slot, now)
        await _together(
            self._create(s) for s in slots if reservations.name(s) not in self._cache.reservations
        )

    def unready(self, assignment: Assignment, uuids: Sequence[str | None]) -> str | None:
        for index in assignment.gpu_indices:
            reservation = self._cache.reservations.get(reservations.name((assignment.node, index)))
            if reservation is None or not reservation.ready:
                where = f"{reservations.name((assignment.node, index))} in namespace {RESERVATIONS}"
                return f"waiting: reservation pod {where} has not reported its GPU yet"
        return None

    def keeps(self, assignment: Assignment) -> bool:
        """A placement awaiting its reservations keeps its slots while each reservation stands: made,
        not being deleted, and not one `repair` deletes (`reservations.failing`). Otherwise the next
        cycle decides the job afresh, as it would a job whose nomination an operator restart forgot."""
        now, timeout = self._clock(), self._settings.report_timeout_s
        for index in assignment.gpu_indices:
            reservation = self._cache.reservations.get(reservations.name((assignment.node, index)))
            if reservation is None or reservation.deleting or reservations.failing(reservation, now, timeout):
                return False
        return True

    def gpu_uuids(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str | None, ...]:
        """The GPUs the device plugin gave the slots' reservations, not the ones Horus's books number."""
        held = self._cache.reservations
        return tuple(
            (held[reservations.name((assignment.node, i))].uuid or None) for i in assignment.gpu_indices
        )

    def pod_claims(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        return ()

    def cdi_devices(self, assignment: Assignment, uuids: Sequence[str | None]) -> tuple[str, ...]:
        """Under `--reservation-device-mode cdi`, the reserved GPUs by their CDI names; co-tenants of a
        slot read the same reservation, so they name the same device. A pod is made only once every
        slot's reservation reported (`unready`), so every UUID is known."""
        if self._settings.device_mode != DeviceMode.CDI:
            return ()
        return tuple(cdi_device(uuid) for uuid in self.gpu_uuids(assignment, uuids) if uuid)

    async def repair(self, changed: bool) -> None:
        """Delete the reservations no pod holds and no placement awaits, those that ended, those the
        device plugin has no GPU left for (the slot counts taken by others a while), and those that never
        reported their GPU (a placement that still wants the slot makes it again); then stop the pods
        whose reservation is gone."""
        now = self._clock()
        timeout = self._settings.report_timeout_s
        pods = [*self._cache.all_pods(), *self._routed()]
        holding = [p for p in pods if p.binding == Binding.RESERVE and p.holds_gpus]
        held = {(pod.node, index) for pod in holding for index in pod.gpu_indices}
        # A placement waits for its slot until its pod holds it, or the report timeout passes.
        self._awaiting = {
            slot: since
            for slot, since in self._awaiting.items()
            if slot not in held and (now - since).total_seconds() <= timeout
        }
        self._elsewhere = {s: t for s, t in self._elsewhere.items() if (now - t).total_seconds() <= timeout}
        existing = list(self._cache.reservations.values())
        doomed = reservations.to_delete(existing, held | set(self._awaiting), now, timeout)
        for reservation in doomed:
            why = _why(reservation, held)
            log.info(
                "deleting reservation pod %s/%s, uid %s (%s)",
                RESERVATIONS,
                reservation.name,
                reservation.uid,
                why,
            )
            self._awaiting.pop(reservation.slot, None)
            if reservation.no_gpu_left:
                self._elsewhere[reservation.slot] = now
        await _together(self._delete(reservation) for reservation in doomed)
        await self._stop_unreserved(holding)

    async def _stop_unreserved(self, holding: Sequence[PodView]) -> None:
        """A pod whose slot's reservation is gone or ended runs on a GPU the kubelet no longer counts
        taken, which the device plugin may give another pod: it is stopped, and its job queues again
        (KAI-Scheduler's binder does the same); a pod of the pod route is made again, gated, by its
        controller."""
        for pod in holding:
            lost = [i for i in pod.gpu_indices if not self._reserved((pod.node, i))]
            if not lost or pod.deleting:
                continue
            message = f"pod {pod.name} stopped: the reservation of {pod.node} GPU {lost[0]} is gone"
            seen = self._cache.reservations.get(reservations.name((pod.node, lost[0])))
            log.warning("%s/%s (the cache holds %s)", pod.namespace, message, seen)
            await self._tell_lost(pod, message)
            await self._kube.delete_pod(pod.namespace, pod.name)
            self._cache.deleted_pod(pod.job_key, pod.name)

    async def _tell_lost(self, pod: PodView, message: str) -> None:
        """The Event: on the pod's DLJob, or on a pod of the pod route itself (no DLJob controls it)."""
        job = self._cache.jobs.get(pod.job_key)
        if job is not None:
            await self._kube.post_event(job, kind="Warning", reason=LOST, message=message)
        elif not pod.owner_uid:
            involved = {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}}
            await self._kube.post_event(
                involved, kind="Warning", reason=LOST, message=message, involved_kind=INVOLVED_POD
            )

    def _reserved(self, slot: Slot) -> bool:
        reservation = self._cache.reservations.get(reservations.name(slot))
        return reservation is not None and reservation.ready

    def refresh(self) -> None:
        return None

    def taken(self) -> Mapping[str, str]:
        return {}

    def taken_slots(self) -> Mapping[Slot, str]:
        """Slots whose reservation the device plugin had no GPU for: another scheduler's pods hold the
        node's GPUs (Horus does not watch them); passed over until the report timeout has passed."""
        return {slot: "another scheduler's nvidia.com/gpu pod (device plugin)" for slot in self._elsewhere}

    async def _create(self, slot: Slot) -> None:
        view = self._cache.node_views.get(slot[0])
        if view is None:
            return
        stored, created = await self._kube.create_pod(reservations.body(slot, view.hostname, self._settings))
        if created:  # logged as its deletion is, by uid: which incarnation a slot had when
            uid = stored["metadata"].get("uid")
            log.info("made reservation pod %s/%s, uid %s", RESERVATIONS, reservations.name(slot), uid)
        self._cache.put_reservation(stored)

    async def _delete(self, reservation: reservations.ReservationView) -> None:
        """That incarnation only (a uid precondition): the slot may have a new one by the time it lands."""
        await self._kube.delete_pod(RESERVATIONS, reservation.name, uid=reservation.uid or None)
        self._cache.deleted_reservation(reservation.name, reservation.uid)


async def _together(calls: Iterable[Awaitable[None]]) -> None:
    """Await every call, concurrently; then raise the first failure, if any (the cycle is retried, and
    what the others did stands: each call is idempotent)."""
    failures = [
        r for r in await asyncio.gather(*calls, return_exceptions=True) if isinstance(r, BaseException)
    ]
    if failures:
        raise failures[0]


def _why(reservation: reservations.ReservationView, held: set[Slot]) -> str:
    if reservation.phase in reservations.ENDED:
        return f"it is {reservation.phase}"
    if reservation.no_gpu_left:
        return f"the device plugin has no GPU left: {reservation.refused}"
    if not reservation.uuid:
        return "it never reported its GPU"
    return "no pod holds its GPU" if reservation.slot not in held else "replaced"
