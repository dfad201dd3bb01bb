"""The binders this cluster serves: `env` and `reserve` always (`reserve` needs NVIDIA's device plugin on
the nodes, which kube-scheduler's fit check finds out); `dra` where the API server serves
resource.k8s.io/v1."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from horus_operator.api.dljob import Binding
from horus_operator.operator.binding import Binder, Bindings
from horus_operator.operator.binding.dra import DraBinder
from horus_operator.operator.binding.reserve import ReserveBinder
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.config import LoopConfig
from horus_operator.operator.jobs.pods import PodView
from horus_operator.operator.kube import Kube


def bindings(
    kube: Kube,
    cache: ClusterCache,
    config: LoopConfig,
    clock: Callable[[], datetime],
    routed: Callable[[], Iterable[PodView]] = tuple,
) -> Bindings:
    """`routed`: the pods the pod route released (`PodRoute.placed`)."""
    reserve = ReserveBinder(kube=kube, cache=cache, settings=config.reservation, clock=clock, routed=routed)
    binders: dict[str, Binder] = {Binding.RESERVE: reserve}
    if config.dra_served:
        binders[Binding.DRA] = DraBinder(kube=kube, cache=cache, sharing=config.sharing)
    return Bindings(binders)
