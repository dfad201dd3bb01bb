"""`horus agent`: the per-node GPU telemetry daemon (see docs/agent.md)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import click

from horus_operator.agent import kube, resourceslice
from horus_operator.agent.backend import BACKENDS
from horus_operator.agent.fake import FakeBackend, FakeInventory, FakeOptions
from horus_operator.agent.fakereserve import ReservationReporter
from horus_operator.agent.metrics import AgentMetrics
from horus_operator.agent.pacing import Backoff, PublishPacer
from horus_operator.agent.runner import Agent
from horus_operator.prediction.measured import TruthTable

log = logging.getLogger(__name__)


@click.group(invoke_without_command=True)
@click.option(
    "--node",
    envvar="HORUS_NODE_NAME",
    show_envvar=True,
    help="This node's name (the DaemonSet passes spec.nodeName).",
)
@click.option(
    "--backend",
    envvar="HORUS_NVML_BACKEND",
    show_envvar=True,
    type=click.Choice(sorted(BACKENDS)),
    default="nvml",
    show_default=True,
    help="nvml: the GPUs through NVIDIA's driver; fake: readings derived from the pods Horus placed here.",
)
@click.option(
    "--truth",
    "truth_path",
    envvar="HORUS_FAKE_TRUTH",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --backend fake: a measured-pairs CSV (the format `horus simulate --truth` reads); pods "
    "then report measured slowdowns, rates and utilizations instead of their predictions.",
)
@click.option(
    "--sample-interval",
    envvar="HORUS_SAMPLE_INTERVAL",
    show_envvar=True,
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between NVML samples.",
)
@click.option(
    "--publish-interval",
    envvar="HORUS_PUBLISH_INTERVAL",
    show_envvar=True,
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between GPUNode status updates (health changes go out at once).",
)
@click.option(
    "--metrics-port",
    envvar="HORUS_METRICS_PORT",
    show_envvar=True,
    type=click.IntRange(min=0, max=65535),
    default=9400,
    show_default=True,
    help="Port of the Prometheus /metrics endpoint; 0 turns it off.",
)
@click.option(
    "--fake-unhealthy-gpu",
    "fake_unhealthy_gpus",
    envvar="HORUS_FAKE_UNHEALTHY_GPUS",
    show_envvar=True,
    multiple=True,
    metavar="NODE:INDEX",
    help="With --backend fake: report this GPU unhealthy, as a GPU that needs a reset reads (repeatable).",
)
@click.option(
    "--all-nodes",
    is_flag=True,
    help="Run one agent loop per node labelled nvidia.com/gpu.present=true, in this process (for kwok "
    "clusters with --backend fake; nodes added later need a restart; no /metrics).",
)
@click.pass_context
def agent(
    ctx: click.Context,
    node: str | None,
    backend: str,
    truth_path: Path | None,
    sample_interval: float,
    publish_interval: float,
    metrics_port: int,
    fake_unhealthy_gpus: tuple[str, ...],
    all_nodes: bool,
) -> None:
    """Sample this node's GPUs and publish them as its GPUNode (horus.dev) and on /metrics."""
    if ctx.invoked_subcommand is not None:
        return
    if bool(node) == all_nodes:
        raise click.UsageError("give --node (or HORUS_NODE_NAME), or --all-nodes")
    if fake_unhealthy_gpus and backend != "fake":
        raise click.UsageError("--fake-unhealthy-gpu needs --backend fake: real GPUs report their own health")
    if truth_path is not None and backend != "fake":
        raise click.UsageError("--truth is for --backend fake: real GPUs measure themselves")
    settings = AgentSettings(
        backend,
        sample_interval,
        publish_interval,
        _unhealthy_by_node(fake_unhealthy_gpus),
        _truth_table(truth_path) if truth_path else None,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kube.load_config()
    stop = _stop_on_signals()
    nodes = kube.gpu_node_names() if all_nodes else [node or ""]
    if backend == "fake":
        _start_reporting_reservations(nodes, stop)
    if all_nodes:
        _run_all(nodes, settings, stop)
        return
    metrics = AgentMetrics()
    if metrics_port:
        metrics.serve(metrics_port)
    run_node(nodes[0], settings, metrics, stop)


@dataclass(frozen=True)
class AgentSettings:
    backend: str
    sample_interval: float
    publish_interval: float
    fake_unhealthy: Mapping[str, frozenset[int]] = field(default_factory=dict)  # node -> GPU indices
    truth: TruthTable | None = None  # the fake reports these measured pairs


def _truth_table(path: Path) -> TruthTable:
    try:
        table = TruthTable.from_csv(path)
    except (KeyError, ValueError) as error:
        problem = f"{path}: not a measured-pairs CSV ({type(error).__name__}: {error})"
        raise click.BadParameter(problem, param_hint="--truth") from error
    if not table.isolated:
        raise click.BadParameter(f"{path}: no measurements", param_hint="--truth")
    return table


def _unhealthy_by_node(entries: tuple[str, ...]) -> dict[str, frozenset[int]]:
    by_node: dict[str, set[int]] = {}
    for entry in entries:
        node, _, index = entry.rpartition(":")
        if not node or not index.isdigit():
            raise click.BadParameter(f"{entry!r} is not NODE:INDEX", param_hint="--fake-unhealthy-gpu")
        by_node.setdefault(node, set()).add(int(index))
    return {node: frozenset(indices) for node, indices in by_node.items()}


def run_node(
    node: str,
    settings: AgentSettings,
    metrics: AgentMetrics,
    stop: threading.Event,
    clock: Callable[[], float] = time.time,
) -> None:
    """One node's agent until `stop` (`clock`: the node's wall clock; tests skew it)."""
    node_info = _read_node_until_available(node, stop)
    if node_info is None:
        return
    options = FakeOptions(settings.fake_unhealthy.get(node, frozenset()), settings.truth)
    backend = BACKENDS[settings.backend](node, node_info.labels, options)
    daemon = Agent(
        node=node,
        backend=backend,
        api=kube.NodeApi(node_info),
        api_error=kube.ApiUnavailableError,
        metrics=metrics,
        pacer=PublishPacer(interval=settings.publish_interval, backoff=Backoff()),
        sample_interval=settings.sample_interval,
        devices=_fake_devices(backend, node_info),
    )
    log.info(
        "agent for %s: backend %s%s, sample every %ss, publish every %ss",
        node,
        settings.backend,
        " reporting measured truth" if settings.truth else "",
        settings.sample_interval,
        settings.publish_interval,
    )
    daemon.run_forever(clock, stop)


def _fake_devices(backend: object, node: kube.NodeInfo) -> dict[str, object] | None:
    """The fake backend's GPUs as the ResourceSlice NVIDIA's DRA driver would publish (kwok nodes have
    no driver); the real backend's GPUs are the driver's to publish."""
    if not isinstance(backend, FakeBackend):
        return None
    return resourceslice.fake_slice(backend.inventory, node.uid)


def _start_reporting_reservations(nodes: list[str], stop: threading.Event) -> None:
    """Fake backend: one thread for the whole process plays `horus reserve` for the reservation pods of
    `nodes`, as soon as each is bound (kwok nodes have no device plugin to start the real one). A daemon:
    it holds nothing a stopping process must finish."""
    thread = threading.Thread(
        target=_report_reservations, args=(nodes, stop), name="fake-reservations", daemon=True
    )
    thread.start()


def _report_reservations(nodes: list[str], stop: threading.Event) -> None:
    """Until `stop`. Each node's GPUs are the fake backend's: the inventory its GFD labels give."""
    uuids: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        info = _read_node_until_available(node, stop)
        if info is None:  # stopped before the API server answered
            return
        uuids[node] = FakeInventory.from_node_labels(node, info.labels).uuids()
    ReservationReporter(uuids, kube.ReservationPods(), kube.ApiUnavailableError).run_forever(stop)


@agent.command("export-observations")
@click.option("--out", type=click.File("w"), default="-", show_default=True, help="CSV file to write.")
@click.option(
    "--namespace",
    envvar="HORUS_LEASE_NAMESPACE",
    default="horus-system",
    show_default=True,
    help="The operator's namespace, where the dataset ConfigMaps live.",
)
def export_observations(out: TextIO, namespace: str) -> None:
    """Write the observed co-locations as one CSV (the format `horus train slowdown --data` reads)."""
    from horus_operator.operator.telemetry import store  # only this subcommand needs the operator side

    out.write(store.export_from_cluster(namespace))


def _run_all(nodes: list[str], settings: AgentSettings, stop: threading.Event) -> None:
    threads = [
        threading.Thread(target=run_node, args=(node, settings, AgentMetrics(), stop), name=f"agent-{node}")
        for node in nodes
    ]
    for thread in threads:
        thread.start()
    log.info("agents for %d nodes: %s", len(nodes), ", ".join(nodes))
    while any(t.is_alive() for t in threads):  # the main thread stays free to take the signals
        stop.wait(1.0)


def _read_node_until_available(node: str, stop: threading.Event) -> kube.NodeInfo | None:
    """The agent may start before the API server answers: wait for it (with backoff) instead of failing."""
    backoff = Backoff()
    while not stop.is_set():
        try:
            return kube.read_node(node)
        except kube.ApiUnavailableError as error:
            delay = backoff.failed(time.time())
            log.warning("reading node %s failed, retrying in %.1fs: %s", node, delay, error)
            stop.wait(delay)
    return None


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop
