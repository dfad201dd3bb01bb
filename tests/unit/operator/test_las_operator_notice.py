"""`horus run --queue-order las` says once, at start, that the operator does not preempt (so its las
serves jobs as fifo does); other orders say nothing of it."""

from __future__ import annotations

import logging

import pytest

from horus_operator.operator import runtime
from horus_operator.operator.config import OperatorConfig


class _Stop(Exception):
    """Raised where `build` would reach the API server: the notice comes before it."""


def _build_until_the_api(monkeypatch: pytest.MonkeyPatch, queue_order: str) -> None:
    def no_client(**_: object) -> None:
        raise _Stop

    monkeypatch.setattr(runtime, "load_client", no_client)
    with pytest.raises(_Stop):
        runtime.build(OperatorConfig(queue_order=queue_order))


def test_las_warns_once_that_the_operator_does_not_preempt(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=runtime.__name__):
        _build_until_the_api(monkeypatch, "las")
    notices = [record for record in caplog.records if record.getMessage() == runtime.LAS_WITHOUT_PREEMPTION]
    assert len(notices) == 1
    assert "does not preempt" in notices[0].getMessage()


@pytest.mark.parametrize("order", ["fifo", "shortest-remaining"])
def test_other_orders_say_nothing_of_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, order: str
) -> None:
    with caplog.at_level(logging.WARNING, logger=runtime.__name__):
        _build_until_the_api(monkeypatch, order)
    assert not [record for record in caplog.records if "preempt" in record.getMessage()]
