"""When to publish, and how long to wait after the API server refused. Pure; times are passed in."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class PublishPacer:
    """Publishes at most once per `interval`, except that a change of GPU health goes out at once
    (placement must stop using a failing GPU without waiting a whole interval). Failed publishes wait
    for the backoff instead."""

    interval: float
    backoff: Backoff
    _last_published_at: float | None = None
    _last_health: tuple[bool, ...] | None = None

    def due(self, now: float, health: tuple[bool, ...]) -> bool:
        if not self.backoff.ready(now):
            return False
        if self._last_published_at is None or health != self._last_health:
            return True
        return now - self._last_published_at >= self.interval

    def published(self, now: float, health: tuple[bool, ...]) -> None:
        self._last_published_at = now
        self._last_health = health
        self.backoff.succeeded()

    def failed(self, now: float) -> float:
        """Records a refused publish; returns the seconds until the next attempt."""
        return self.backoff.failed(now)


@dataclass
class Backoff:
    """Exponential backoff, capped, with "equal jitter": a random delay between half and all of the
    current ceiling, so that agents of many nodes do not retry in lockstep after an API-server outage."""

    base: float = 1.0
    cap: float = 60.0
    rng: random.Random = field(default_factory=random.Random)
    _failures: int = 0
    _next_attempt_at: float = float("-inf")

    def ready(self, now: float) -> bool:
        return now >= self._next_attempt_at

    def failed(self, now: float) -> float:
        self._failures += 1
        ceiling = min(self.cap, self.base * 2 ** (self._failures - 1))
        delay = self.rng.uniform(ceiling / 2, ceiling)
        self._next_attempt_at = now + delay
        return delay

    def succeeded(self) -> None:
        self._failures = 0
        self._next_attempt_at = float("-inf")
