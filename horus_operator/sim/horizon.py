"""The simulator's running estimate of the makespan horizon (`placement.makespan.horizon_s`).

Kept incrementally, so an event costs O(log jobs): the remaining GPU-work falls at the cluster's
normalised throughput (isolated GPU-seconds done per second); the longest remaining work is the larger
of the wait queue's longest and the top of a lazily cleaned heap of running jobs (the time their
remaining work would take alone, from their last change of rate: a slight underestimate while they
share).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from horus_operator.placement.makespan import horizon_s


class Horizon:
    def __init__(self, gpus: int) -> None:
        self.gpus = gpus
        self.work_left_gpu_s = 0.0
        self._running: list[tuple[float, int, str, int]] = []  # (-alone finish time, order, key, version)
        self._order = itertools.count()

    def arrived(self, work_gpu_s: float) -> None:
        self.work_left_gpu_s += work_gpu_s

    def dropped(self, work_gpu_s: float) -> None:
        """Work that will never run (a job no node can run)."""
        self.work_left_gpu_s -= work_gpu_s

    def worked(self, gpu_s: float) -> None:
        self.work_left_gpu_s = max(0.0, self.work_left_gpu_s - gpu_s)

    def running(self, key: str, version: int, alone_finish_s: float) -> None:
        heapq.heappush(self._running, (-alone_finish_s, next(self._order), key, version))

    def at(self, now: float, longest_waiting_s: float, version_of: Callable[[str], int | None]) -> float:
        """The horizon at `now`. Heap entries of running jobs whose rate changed since (`version_of` a
        key: its current version, None once finished) are dropped."""
        while self._running and version_of(self._running[0][2]) != self._running[0][3]:
            heapq.heappop(self._running)
        longest_running = -self._running[0][0] - now if self._running else 0.0
        return horizon_s(now, self.work_left_gpu_s, self.gpus, max(longest_waiting_s, longest_running))
