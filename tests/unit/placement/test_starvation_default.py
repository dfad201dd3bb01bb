"""The default starvation bound (issue 46, item 3): a multiple of a job's own length where the order
reads lengths, the day alone where it does not; what `horus run` and `horus simulate` build from their
flags."""

from __future__ import annotations

import math

import pytest

from horus_operator.placement.queueorder import (
    DEFAULT_MAX_WAIT_S,
    DEFAULT_STARVATION_MULTIPLE,
    QueueOrder,
    Starvation,
)


def test_shortest_remaining_bounds_a_wait_by_a_multiple_of_the_job_s_length_by_default() -> None:
    starvation = Starvation.of(QueueOrder.SHORTEST_REMAINING)
    assert starvation == Starvation(DEFAULT_MAX_WAIT_S, DEFAULT_STARVATION_MULTIPLE)
    hour = 3600.0
    # A one-hour job is due after ten hours, not a day; a three-day job moves up after the day, but is
    # due only after thirty days, so the starved short jobs queued since go before it.
    assert starvation.starves_at(0.0, hour) == starvation.due_at(0.0, hour) == 10 * hour
    assert starvation.starves_at(0.0, 72 * hour) == DEFAULT_MAX_WAIT_S
    assert starvation.due_at(0.0, 72 * hour) == 720 * hour


@pytest.mark.parametrize("order", [QueueOrder.FIFO, QueueOrder.LAS])
def test_orders_that_read_no_lengths_keep_the_day_alone(order: QueueOrder) -> None:
    assert Starvation.of(order) == Starvation()


@pytest.mark.parametrize("order", list(QueueOrder))
def test_a_multiple_given_is_kept_and_an_infinite_one_turns_it_off(order: QueueOrder) -> None:
    assert Starvation.of(order, 600.0, 3.0) == Starvation(600.0, 3.0)
    assert Starvation.of(order, None, math.inf) == Starvation(None, None)
