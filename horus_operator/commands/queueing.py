"""The queue-order flags `horus run` and `horus simulate` share, so the operator and the simulator are
configured alike (`placement/queueorder.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from horus_operator.placement.queueorder import DEFAULT_MAX_WAIT_S, DEFAULT_STARVATION_MULTIPLE, QueueOrder

F = TypeVar("F", bound=Callable[..., Any])


def queue_options(*, environment: bool) -> Callable[[F], F]:
    """`--queue-order`, `--max-wait-seconds` and `--starvation-multiple`; with `environment`, each also
    read from `HORUS_<NAME>` (what the operator's Deployment sets)."""

    def envvar(flag: str) -> str | None:
        return "HORUS_" + flag.removeprefix("--").upper().replace("-", "_") if environment else None

    options = (
        click.option(
            "--queue-order",
            type=click.Choice([order.value for order in QueueOrder]),
            default=QueueOrder.FIFO.value,
            show_default=True,
            envvar=envvar("--queue-order"),
            help="The order waiting jobs of one priority are served in: fifo, shortest-remaining (least "
            "remaining GPU-work first) or las (least attained GPU-service first, preempting running "
            "jobs of more).",
        ),
        click.option(
            "--max-wait-seconds",
            type=float,
            default=DEFAULT_MAX_WAIT_S,
            show_default=True,
            envvar=envvar("--max-wait-seconds"),
            help="A job waiting longer moves to the front of its priority (inf: never).",
        ),
        click.option(
            "--starvation-multiple",
            type=float,
            envvar=envvar("--starvation-multiple"),
            help="A job waiting longer than this multiple of its remaining work moves up too, and the "
            "starved line up by when each was due (queued + this multiple × its length) [default: "
            f"{DEFAULT_STARVATION_MULTIPLE:g} under shortest-remaining, off under fifo and las; inf: off].",
        ),
    )

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate
