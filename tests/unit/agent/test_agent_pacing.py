import random

from horus_operator.agent.pacing import Backoff, PublishPacer

HEALTHY = (True, True)


def pacer(interval: float = 10.0) -> PublishPacer:
    return PublishPacer(interval=interval, backoff=Backoff(base=1.0, cap=8.0, rng=random.Random(0)))


def test_first_publish_is_due_then_once_per_interval() -> None:
    p = pacer()
    assert p.due(0.0, HEALTHY)
    p.published(0.0, HEALTHY)
    assert not p.due(9.9, HEALTHY)
    assert p.due(10.0, HEALTHY)


def test_a_health_change_is_published_without_waiting_for_the_interval() -> None:
    p = pacer()
    p.published(0.0, HEALTHY)
    assert p.due(1.0, (True, False))


def test_failures_back_off_exponentially_within_the_cap_and_success_resets() -> None:
    p = pacer()
    delays = [p.failed(0.0) for _ in range(6)]

    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert not p.due(delays[-1] - 0.001, HEALTHY)
    assert p.due(delays[-1], HEALTHY)
    p.published(delays[-1], HEALTHY)
    assert p.failed(100.0) <= 1.0
