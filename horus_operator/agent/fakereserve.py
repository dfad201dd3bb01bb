"""The fake agent's stand-in for `horus reserve` (agent/reserve.py) on a local cluster: kwok nodes have no
device plugin and run no container, so nothing else would report a reservation pod's GPU.

One `ReservationReporter` per `horus agent --backend fake` process covers every node the process runs. It
lists the reservation pods (namespace `horus-reservation`, label `horus.dev/reservation-node`), then
watches them, keeping its own copy by pod UID. On each change it looks at that pod's node again and tells
each reservation bound there that has not reported a GPU of the node no other reservation holds
(`reserve.reservations_to_report`): at once, as the real program reports as soon as its container runs,
not at the agent's next publish, the annotations on a pool of threads. A refused annotation is retried
with the GPU chosen at the next event and at the re-check after every watch round (a few seconds); one
whose pod is gone is dropped with the pod. A failed list or watch backs off and lists again; API
errors never end it, `stop` does.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from horus_operator.agent import reserve
from horus_operator.agent.pacing import Backoff
from horus_operator.agent.readings import PodInfo
from horus_operator.api import keys

log = logging.getLogger(__name__)
DELETED = "DELETED"  # a watch event's type; ADDED and MODIFIED both mean "the pod is now this"
_ENDED_PHASES = frozenset({"Succeeded", "Failed"})
SENDERS = 16  # annotations in flight at once


@dataclass(frozen=True)
class ReservationPod:
    """A reservation pod as the API server shows it."""

    pod: PodInfo
    node_name: str | None  # spec.nodeName: None until the scheduler binds it
    phase: str | None

    @property
    def slot_node(self) -> str:
        """The node of its slot (its label), whether it is bound there yet or not."""
        return self.pod.labels.get(keys.LABEL_RESERVATION_NODE, "")

    @property
    def holds_gpu(self) -> bool:
        """Bound to its slot's node and not ended: it holds, or is about to hold, one of that node's GPUs
        (a device plugin allocates at binding; an ended pod's GPU is free again)."""
        return self.node_name == self.slot_node and self.phase not in _ENDED_PHASES


class ReservationApi(Protocol):
    """The reservation pods on the API server (`kube.ReservationPods` in production)."""

    def list_pods(self) -> list[ReservationPod]:
        """All of them now; the next `watch_pods` goes on from this list."""
        ...

    def watch_pods(self) -> Iterable[tuple[str, ReservationPod]]:
        """(event type, pod) for each change since the list or the last event, for a few seconds."""
        ...

    def annotate(self, pod: PodInfo, annotations: Mapping[str, str]) -> bool:
        """Merge `annotations` into that pod, that incarnation only; False when it is gone (deleted, or
        its name now another pod's)."""
        ...


@dataclass
class ReservationReporter:
    """What one fake agent process tells the reservation pods of its nodes; one thread runs it."""

    uuids: Mapping[str, Sequence[str]]  # each node this process runs -> its GPU UUIDs, in index order
    api: ReservationApi
    api_error: type[Exception]  # what `api` raises when the API server refuses
    backoff: Backoff = field(default_factory=Backoff)
    # Runs each annotation: on a pool's threads, so that a burst's reservations are told together, as
    # each node's own program tells its own, and the watch is followed meanwhile (one after another, each
    # a round trip to a loaded API server, they fell minutes behind the events at 100 nodes). Tests run
    # them at once.
    send: Callable[[Callable[[], None]], object] = field(
        default_factory=lambda: ThreadPoolExecutor(SENDERS, thread_name_prefix="fake-reserve").submit
    )
    # Seconds between lists, whatever the watch says: a chaos run's watch, resumed every 5 s without an
    # error, delivered no event for 5 minutes until the version it resumed from expired (410), while the
    # operator made reservations there that were never told; a list heals that within this long.
    relist_every: float = 30.0
    _pods: dict[str, ReservationPod] = field(default_factory=dict)  # by pod UID
    # Pod UID -> the GPU this process gave it, for the pod's life (a device plugin's allocation: made when
    # chosen, whenever the annotation lands): a copy older than our own annotation (an event sent before
    # it landed) shows the pod silent, and it must not be told another GPU.
    _reported: dict[str, str] = field(default_factory=dict)
    # (pod UID, whether the pod is gone) of annotations that did not land, from the senders' threads
    _unsent: queue.SimpleQueue[tuple[str, bool]] = field(default_factory=queue.SimpleQueue)

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.replace(self.api.list_pods())
                self._follow(stop, until=time.monotonic() + self.relist_every)
            except self.api_error as error:
                delay = self.backoff.failed(time.monotonic())
                log.warning("watching reservation pods failed, listing them again in %.1fs: %s", delay, error)
                stop.wait(delay)

    def replace(self, pods: Iterable[ReservationPod]) -> None:
        """A fresh list: what a failed watch missed (a deletion, say) is caught up on; every node checked."""
        listed = {r.pod.uid: r for r in pods}
        missed, gone = listed.keys() - self._pods.keys(), self._pods.keys() - listed.keys()
        if self._pods and (missed or gone):
            shown = (len(missed), len(gone))
            log.info("listed: %d reservations the watch had not shown, %d gone it had not", *shown)
        self._pods = listed
        self._reported = {uid: uuid for uid, uuid in self._reported.items() if uid in self._pods}
        self.check_all()

    def observe(self, event_type: str, reservation: ReservationPod) -> None:
        """One watch event. Its node is checked again whatever the change: a deleted or ended reservation
        frees a GPU that one waiting there can take."""
        self._retry_unsent()
        uid = reservation.pod.uid
        if event_type == DELETED:
            self._pods.pop(uid, None)
            self._reported.pop(uid, None)  # a pod made again under the name is a new UID, told anew
        else:
            self._pods[uid] = reservation
        self._check(reservation.slot_node)

    def check_all(self) -> None:
        self._retry_unsent()
        holding = self._holding()
        for node, uuids in self.uuids.items():
            self._report(node, uuids, holding.get(node, []))

    def _follow(self, stop: threading.Event, until: float) -> None:
        """Watch rounds until `stop`, or `until` (monotonic): then the caller lists again. Each round ends
        within seconds, so `stop` is noticed, and is followed by a re-check of every node, so that refused
        annotations are retried even while nothing changes."""
        while not stop.is_set():
            for event_type, reservation in self.api.watch_pods():
                self.observe(event_type, reservation)
                if stop.is_set():
                    return
            self.backoff.succeeded()  # only a whole round: a list allowed and a watch refused still back off
            self.check_all()
            if time.monotonic() >= until:
                return

    def _check(self, node: str) -> None:
        uuids = self.uuids.get(node)
        if uuids is not None:  # else a node this process does not run
            self._report(node, uuids, self._holding().get(node, []))

    def _holding(self) -> dict[str, list[PodInfo]]:
        """Node -> the reservations that hold one of its GPUs."""
        by_node: dict[str, list[PodInfo]] = {}
        for reservation in self._pods.values():
            if reservation.holds_gpu:
                by_node.setdefault(reservation.slot_node, []).append(reservation.pod)
        return by_node

    def _report(self, node: str, uuids: Sequence[str], holding: Sequence[PodInfo]) -> None:
        by_name = {(p.namespace, p.name): p for p in holding}
        for key, uuid in reserve.reservations_to_report(holding, uuids, self._reported).items():
            self._tell(by_name[key], node, uuid)

    def _tell(self, pod: PodInfo, node: str, uuid: str) -> None:
        self._reported[pod.uid] = uuid
        self.send(lambda: self._annotate(pod, node, uuid))

    def _annotate(self, pod: PodInfo, node: str, uuid: str) -> None:
        """On a sender's thread: touches nothing but the API and `_unsent`."""
        try:
            landed = self.api.annotate(pod, {keys.ANNOTATION_RESERVED_GPU: uuid})
        except self.api_error as error:
            log.warning("telling %s/%s its GPU failed (retried): %s", pod.namespace, pod.name, error)
            self._unsent.put((pod.uid, False))
            return
        if not landed:  # deleted before it was told: its GPU is free again, whatever the watch shows yet
            self._unsent.put((pod.uid, True))
            return
        log.info("reservation %s/%s (%s) on %s reports GPU %s", pod.namespace, pod.name, pod.uid, node, uuid)

    def _retry_unsent(self) -> None:
        """The annotations that did not land: sent again with the GPU chosen (the pod's for its life),
        unless the pod is gone. Only those failed so far: one failing again waits for the next call."""
        for _ in range(self._unsent.qsize()):
            uid, gone = self._unsent.get()
            reservation, uuid = self._pods.get(uid), self._reported.get(uid)
            if gone or reservation is None or uuid is None:
                self._pods.pop(uid, None)
                self._reported.pop(uid, None)
                continue
            self._tell(reservation.pod, reservation.slot_node, uuid)
