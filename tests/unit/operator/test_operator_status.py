"""The one status writer: the loop's merge patch clears what it drops and never sends fields others own."""

from __future__ import annotations

from horus_operator.operator import status


def test_the_loop_clears_dropped_fields_and_leaves_observed_to_its_writer() -> None:
    current = {"phase": "Queued", "message": "waiting", "observed": {"slowdown": 1.5}}
    new = {"phase": "Scheduled", "node": "n0", "observed": {"slowdown": 1.0}}  # an older cached copy
    assert status.loop_patch(current, new) == {"message": None, "phase": "Scheduled", "node": "n0"}


def test_fields_others_own_are_carried_over_unchanged() -> None:
    assert status.owned_by_others({"phase": "Running", "observed": {"slowdown": 1.2}}) == {
        "observed": {"slowdown": 1.2}
    }
