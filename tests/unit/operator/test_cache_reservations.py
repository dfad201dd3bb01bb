"""The cache's reservation pods (`binding/reservations.py`) across incarnations of one name: a slot's
reservation deleted and made again is a new pod of the same name, and the watch may deliver the old
one's last events after the new one is cached (chaos under `reserve`, docs/reliability.md)."""

from __future__ import annotations

from typing import Any

from horus_operator.api import keys
from horus_operator.operator.binding import reservations
from horus_operator.operator.cache import ClusterCache

NAME = "gpu-gpu-node-0-0"


def _reservation(uid: str, version: str, uuid: str = "") -> dict[str, Any]:
    body = reservations.body(("gpu-node-0", 0), "gpu-node-0", reservations.ReservationSettings())
    body["metadata"].update(uid=uid, resourceVersion=version, creationTimestamp="2026-12-07T00:00:00Z")
    if uuid:
        body["metadata"]["annotations"][keys.ANNOTATION_RESERVED_GPU] = uuid
    body["status"] = {"phase": "Running"}
    return body


def test_the_old_incarnations_late_deletion_leaves_the_new_one() -> None:
    cache = ClusterCache()
    cache.put_reservation(_reservation("old", "10", "GPU-a"))
    cache.deleted_reservation(NAME, "old")  # deleted by the operator: no pod held it
    cache.put_reservation(_reservation("new", "20"))  # made again for another placement
    cache.put_reservation(_reservation("new", "21", "GPU-b"))
    cache.drop_reservation(_reservation("old", "12", "GPU-a"))  # the watch's DELETED, late
    assert cache.reservations[NAME].uuid == "GPU-b"
    assert cache.reservations[NAME].ready


def test_the_old_incarnations_late_update_does_not_replace_the_new_one() -> None:
    cache = ClusterCache()
    cache.put_reservation(_reservation("old", "10"))
    cache.deleted_reservation(NAME, "old")
    cache.put_reservation(_reservation("new", "20", "GPU-b"))
    cache.put_reservation(_reservation("old", "11", "GPU-a"))  # its report, delivered after the deletion
    assert cache.reservations[NAME].uuid == "GPU-b"


def test_an_update_older_than_the_cached_copy_is_not_kept() -> None:
    cache = ClusterCache()
    cache.put_reservation(_reservation("r", "11", "GPU-a"))
    cache.put_reservation(_reservation("r", "10"))  # the create's answer, after the watch's report
    assert cache.reservations[NAME].uuid == "GPU-a"


def test_the_operators_deletion_of_the_old_incarnation_leaves_the_new_one() -> None:
    cache = ClusterCache()
    cache.put_reservation(_reservation("new", "20", "GPU-b"))  # cached while the old one's deletion ran
    cache.deleted_reservation(NAME, "old")
    assert cache.reservations[NAME].uuid == "GPU-b"
    cache.put_reservation(_reservation("old", "12", "GPU-a"))  # and the deleted one never comes back
    assert cache.reservations[NAME].uid == "new"
