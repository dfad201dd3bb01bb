"""The fake agent's stand-in for `horus reserve` (agent/fakereserve.py), driven by its watch events
through a stand-in for our own API adapter (`kube.ReservationPods`)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Mapping

import pytest

from horus_operator.agent.fakereserve import ReservationPod, ReservationReporter
from horus_operator.agent.pacing import Backoff
from horus_operator.agent.readings import PodInfo
from horus_operator.api import keys

GPUS = ("GPU-a", "GPU-b")


class Refused(Exception):
    pass


class ReservationApi:
    """Each list shows the next of `listings` (the last one stays); each watch plays the next of `rounds`
    (an exception: the watch fails) and, once none is left, sets `stop`."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop or threading.Event()
        self.listings: list[list[ReservationPod]] = [[]]
        self.lists = 0
        self.rounds: list[list[tuple[str, ReservationPod]] | Exception] = []
        self.refusing = False
        self.gone: set[str] = set()  # pod UIDs deleted on the API server before their telling landed
        self.annotated: list[tuple[str, str]] = []  # (pod name, GPU)

    def list_pods(self) -> list[ReservationPod]:
        self.lists += 1
        return self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]

    def watch_pods(self) -> Iterator[tuple[str, ReservationPod]]:
        if not self.rounds:
            self.stop.set()
            return
        events = self.rounds.pop(0)
        if isinstance(events, Exception):
            raise events
        yield from events

    def annotate(self, pod: PodInfo, annotations: Mapping[str, str]) -> bool:
        if self.refusing:
            raise Refused("connection refused")
        if pod.uid in self.gone:
            return False
        assert pod.namespace == keys.RESERVATION_NAMESPACE
        self.annotated.append((pod.name, annotations[keys.ANNOTATION_RESERVED_GPU]))
        return True


def reservation(
    name: str,
    *,
    uid: str | None = None,
    slot_node: str = "node-a",
    bound_to: str | None = "node-a",
    phase: str = "Pending",
    gpu: str = "",
) -> ReservationPod:
    pod = PodInfo(
        uid=uid or f"uid-{name}",
        namespace=keys.RESERVATION_NAMESPACE,
        name=name,
        labels={keys.LABEL_RESERVATION_NODE: slot_node},
        annotations={keys.ANNOTATION_RESERVED_GPU: gpu} if gpu else {},
    )
    return ReservationPod(pod=pod, node_name=bound_to, phase=phase)


def reporter(api: ReservationApi, uuids: Mapping[str, tuple[str, ...]] | None = None) -> ReservationReporter:
    backoff = Backoff(base=0.01, cap=0.02, rng=random.Random(0))
    # Each annotation sent at once, in order (the product sends them on a pool's threads).
    return ReservationReporter(uuids or {"node-a": GPUS}, api, Refused, backoff, send=lambda tell: tell())


def test_a_bound_silent_reservation_is_told_a_gpu_at_once_on_its_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = ReservationApi()
    caplog.set_level("INFO")

    reporter(api).observe("ADDED", reservation("r0"))

    assert api.annotated == [("r0", "GPU-a")]
    assert "reservation horus-reservation/r0 (uid-r0) on node-a reports GPU GPU-a" in caplog.text


def test_an_unbound_reservation_waits_until_it_is_bound() -> None:
    api = ReservationApi()
    reporting = reporter(api)

    reporting.observe("ADDED", reservation("r0", bound_to=None))
    assert api.annotated == []
    reporting.observe("MODIFIED", reservation("r0"))
    assert api.annotated == [("r0", "GPU-a")]


def test_a_second_reservation_gets_another_free_gpu() -> None:
    api = ReservationApi()
    reporting = reporter(api)

    reporting.observe("ADDED", reservation("r0"))
    reporting.observe("MODIFIED", reservation("r0", gpu="GPU-a"))  # our annotation, as the watch shows it
    reporting.observe("ADDED", reservation("r1"))

    assert api.annotated == [("r0", "GPU-a"), ("r1", "GPU-b")]


def test_a_reservation_told_a_gpu_keeps_it_whatever_a_lagging_copy_shows() -> None:
    api = ReservationApi()
    reporting = reporter(api)
    reporting.observe("ADDED", reservation("r0"))

    # An event sent before the annotation landed: r0 is not told again, and its GPU is not r1's.
    reporting.observe("MODIFIED", reservation("r0"))
    reporting.observe("ADDED", reservation("r1"))
    reporting.check_all()

    assert api.annotated == [("r0", "GPU-a"), ("r1", "GPU-b")]


def test_a_deleted_or_ended_reservations_gpu_goes_to_one_waiting_for_it() -> None:
    api = ReservationApi()
    reporting = reporter(api)
    for name in ("r0", "r1", "r2"):  # two GPUs: r2 waits
        reporting.observe("ADDED", reservation(name))
    assert api.annotated == [("r0", "GPU-a"), ("r1", "GPU-b")]

    reporting.observe("DELETED", reservation("r0", gpu="GPU-a"))
    reporting.observe("MODIFIED", reservation("r1", gpu="GPU-b", phase="Failed"))
    reporting.observe("ADDED", reservation("r0", uid="uid-r0-again"))  # made again: a new pod, told anew

    assert api.annotated[2:] == [("r2", "GPU-a"), ("r0", "GPU-b")]


def test_a_refused_annotation_is_sent_again_with_the_gpu_chosen_and_once_landed_not_again() -> None:
    api = ReservationApi()
    reporting = reporter(api)
    api.refusing = True
    reporting.observe("ADDED", reservation("r0"))
    api.refusing = False

    reporting.observe("ADDED", reservation("r1"))  # GPU-a stays r0's while its telling is retried
    reporting.check_all()  # the re-checks after watch rounds
    reporting.check_all()

    assert api.annotated == [("r0", "GPU-a"), ("r1", "GPU-b")]


def test_a_reservation_gone_before_its_telling_landed_frees_its_gpu_before_the_watch_says_so() -> None:
    api = ReservationApi()
    reporting = reporter(api)
    api.gone.add("uid-r0")  # deleted (or its name another pod's now): the patch naming its uid fails
    reporting.observe("ADDED", reservation("r0"))
    reporting.observe("ADDED", reservation("r1"))
    reporting.observe("ADDED", reservation("r2"))

    assert api.annotated == [("r1", "GPU-a"), ("r2", "GPU-b")]


def test_reservations_on_nodes_this_process_does_not_run_are_left_alone() -> None:
    api = ReservationApi()
    reporting = reporter(api)

    reporting.observe("ADDED", reservation("elsewhere", slot_node="node-b", bound_to="node-b"))
    reporting.observe("ADDED", reservation("astray", bound_to="node-b"))  # bound off its slot's node
    reporting.check_all()

    assert api.annotated == []


def test_it_lists_then_follows_the_watch_and_lists_again_after_a_failed_watch() -> None:
    stop = threading.Event()
    api = ReservationApi(stop)
    api.listings = [
        [reservation("r0")],  # silent when the process starts: told at the first list
        [reservation("r0", gpu="GPU-a"), reservation("b0", slot_node="node-b", bound_to="node-b")],
    ]
    api.rounds = [Refused("410 Gone"), [], [("ADDED", reservation("r1"))]]

    reporter(api, {"node-a": GPUS, "node-b": ("GPU-c",)}).run_forever(stop)

    assert api.lists == 2  # a quiet round is resumed, not listed again
    assert api.annotated == [("r0", "GPU-a"), ("b0", "GPU-c"), ("r1", "GPU-b")]


def test_it_lists_again_on_its_period_what_a_quiet_watch_did_not_show() -> None:
    stop = threading.Event()
    api = ReservationApi(stop)
    # A reservation made while the watch, resumed without an error, showed nothing: the next list has it.
    api.listings = [[], [reservation("r0")]]
    api.rounds = [[], []]
    reporting = reporter(api)
    reporting.relist_every = 0.0  # after every round

    reporting.run_forever(stop)

    assert api.lists == 3  # at the start and after each of the two rounds
    assert api.annotated == [("r0", "GPU-a")]
