"""`horus run --queue-order las` says once, at start, that running DLJobs may be preempted and after how
long; other orders say nothing of it."""

from __future__ import annotations

import logging

import pytest

from horus_operator.operator import runtime
from horus_operator.operator.config import OperatorConfig


class _Stop(Exception):
    """Raised where `build` would reach the API server: the notice comes before it."""


def _build_until_the_api(monkeypatch: pytest.MonkeyPatch, config: OperatorConfig) -> None:
    def no_client(**_: object) -> None:
        raise _Stop

    monkeypatch.setattr(runtime, "load_client", no_client)
    with pytest.raises(_Stop):
        runtime.build(config)


def test_las_says_once_that_it_preempts_and_after_how_long(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = OperatorConfig(queue_order="las", preemption_min_run_seconds=900.0)
    with caplog.at_level(logging.INFO, logger=runtime.__name__):
        _build_until_the_api(monkeypatch, config)
    notices = [record for record in caplog.records if record.msg == runtime.LAS_PREEMPTS]
    assert len(notices) == 1
    assert "may be preempted" in notices[0].getMessage() and "900 s" in notices[0].getMessage()


@pytest.mark.parametrize("order", ["fifo", "shortest-remaining"])
def test_other_orders_say_nothing_of_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, order: str
) -> None:
    with caplog.at_level(logging.INFO, logger=runtime.__name__):
        _build_until_the_api(monkeypatch, OperatorConfig(queue_order=order))
    assert not [record for record in caplog.records if "preempt" in record.getMessage()]
