"""`horus cluster …`: the local control plane with fake GPU nodes (see docs/local-cluster.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from horus_operator import devcluster

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where pid files, logs, etcd data and the kubeconfig live "
    "[default: $HORUS_CLUSTER_DIR or ~/.local/state/horus/cluster].",
)


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _pool_options(count_name: str, count_default: int) -> list[Decorator]:
    """Options describing one GpuNodePool; `count_name` is how the pool size is spelled."""
    defaults = devcluster.GpuNodePool()
    return [
        click.option(
            count_name, "count", type=click.IntRange(min=0), default=count_default, show_default=True
        ),
        click.option(
            "--gpus-per-node", type=click.IntRange(min=0), default=defaults.gpus_per_node, show_default=True
        ),
        click.option(
            "--gpu-product", default=defaults.gpu_product, show_default=True, help="nvidia.com/gpu.product"
        ),
        click.option(
            "--gpu-memory",
            "gpu_memory_mib",
            type=click.IntRange(min=1),
            default=defaults.gpu_memory_mib,
            show_default=True,
            help="MiB per GPU (nvidia.com/gpu.memory).",
        ),
        click.option("--name-prefix", default=defaults.name_prefix, show_default=True),
    ]


def _with_options(options: list[Decorator]) -> Decorator:
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def _local_cluster(state_dir: Path | None, **kwargs: Any) -> devcluster.LocalCluster:
    return devcluster.LocalCluster(state_dir, progress=lambda line: click.echo(line, err=True), **kwargs)


def _fail(error: Exception) -> NoReturn:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)


@click.group()
def cluster() -> None:
    """Local control plane (kube-apiserver, scheduler, controller-manager, kwok) with fake GPU nodes."""


@cluster.command()
def build() -> None:
    """Compile the control plane from Go modules (cached; a second run returns at once)."""
    devcluster.ControlPlane.pinned().build()


@cluster.command()
@_state_dir_option
@_with_options(_pool_options("--nodes", devcluster.GpuNodePool().count))
def up(state_dir: Path | None, **pool_fields: Any) -> None:
    """Start a local cluster and wait until its API server and all fake GPU nodes are ready."""
    local = _local_cluster(state_dir, pools=[devcluster.GpuNodePool(**pool_fields)])
    try:
        local.up()
    except (devcluster.ClusterError, devcluster.ControlPlaneMissingError) as error:
        _fail(error)
    click.echo(f"cluster up in {local.state_dir}\n  export KUBECONFIG={local.kubeconfig}", err=True)


@cluster.command("add-nodes")
@_state_dir_option
@_with_options(_pool_options("--count", 1))
def add_nodes(state_dir: Path | None, **pool_fields: Any) -> None:
    """Add fake GPU nodes to a running cluster (numbered after the existing ones)."""
    local = _local_cluster(state_dir)
    if not local.is_running():
        _fail(devcluster.ClusterError(f"no cluster running in {local.state_dir}"))
    for name in local.add_nodes(devcluster.GpuNodePool(**pool_fields)):
        click.echo(name)


@cluster.command()
@_state_dir_option
def down(state_dir: Path | None) -> None:
    """Stop the processes `up` started and remove the state directory."""
    local = _local_cluster(state_dir)
    try:
        local.down()
    except devcluster.ClusterError as error:
        _fail(error)
    click.echo(f"cluster in {local.state_dir} stopped", err=True)


@cluster.command()
@_state_dir_option
def status(state_dir: Path | None) -> None:
    """Show each process, the API server's readiness and the nodes; exit 1 unless all is up."""
    report = _local_cluster(state_dir).status()
    if not report.components:
        _fail(devcluster.ClusterError(f"no cluster in {report.state_dir}"))
    for component in report.components:
        click.echo(
            f"{component.name:<24} pid {component.pid:<8} {'running' if component.alive else 'EXITED'}"
        )
    click.echo(f"{'ports':<24} {' '.join(f'{name}={port}' for name, port in report.ports.items())}")
    click.echo(f"{'apiserver /readyz':<24} {'ok' if report.apiserver_ready else 'NOT READY'}")
    click.echo(f"{'nodes ready':<24} {report.nodes_ready}/{report.nodes_total}")
    if not (report.running and report.apiserver_ready and report.nodes_ready == report.nodes_total):
        sys.exit(1)


@cluster.command()
@_state_dir_option
def kubeconfig(state_dir: Path | None) -> None:
    """Print the kubeconfig path: `export KUBECONFIG=$(horus cluster kubeconfig)`."""
    click.echo(_local_cluster(state_dir).kubeconfig)


@cluster.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_state_dir_option
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def kubectl(state_dir: Path | None, args: tuple[str, ...]) -> None:
    """Run the compiled kubectl against the local cluster: `horus cluster kubectl get nodes`."""
    local = _local_cluster(state_dir)
    try:
        binary = devcluster.kubectl_path()
    except devcluster.ControlPlaneMissingError as error:
        _fail(error)
    os.execve(binary, [str(binary), *args], {**os.environ, "KUBECONFIG": str(local.kubeconfig)})
