"""`horus run`: the operator (kopf) in the foreground. Every flag also reads an environment variable
(`HORUS_<NAME>`, what the Deployment sets); the settings are built here once and handed to the operator."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

import click

from horus_operator.api.dljob import Binding
from horus_operator.commands.queueing import queue_options
from horus_operator.operator.binding.reservations import DeviceMode
from horus_operator.operator.config import OperatorConfig as Defaults
from horus_operator.operator.dra.claims import Sharing

F = TypeVar("F", bound=Callable[..., Any])


def _number(flag: str, kind: type, default: float, help: str | None = None) -> Callable[[F], F]:
    """A numeric setting: `--name` or the environment variable `HORUS_NAME`, with its default shown."""
    return _setting(flag, kind, default, help)


def _choice(flag: str, values: type[Enum], default: Enum, help: str) -> Callable[[F], F]:
    """A setting taking one of an enum's values, as `_number`."""
    return _setting(flag, click.Choice([value.value for value in values]), default.value, help)


def _setting(flag: str, kind: Any, default: Any, help: str | None) -> Callable[[F], F]:
    envvar = "HORUS_" + flag.removeprefix("--").upper().replace("-", "_")
    return click.option(flag, type=kind, default=default, show_default=True, envvar=envvar, help=help)


@click.command()
@click.option("--models", type=click.Path(file_okay=False), envvar="HORUS_MODELS", help="Model directory.")
@click.option(
    "--policy", default=Defaults.policy, show_default=True, envvar="HORUS_POLICY", help="Placement policy."
)
@click.option("--namespace", envvar="HORUS_NAMESPACE", help="Watch one namespace [default: all].")
@click.option("--all-namespaces", "-A", is_flag=True, help="Watch all namespaces (the default).")
@click.option(
    "--lease-namespace",
    default=Defaults.lease_namespace,
    show_default=True,
    envvar="HORUS_LEASE_NAMESPACE",
    help="Namespace of the leader-election Lease.",
)
@click.option("--identity", envvar="HORUS_IDENTITY", help="Lease holder identity [default: host name].")
@_number("--resync-seconds", float, Defaults.resync_seconds)
@_number(
    "--unschedulable-grace-seconds",
    float,
    Defaults.unschedulable_grace_seconds,
    "Re-place a pod unschedulable for longer.",
)
@_number(
    "--not-ready-grace-seconds",
    float,
    Defaults.not_ready_grace_seconds,
    "Re-place a pod whose node has been NotReady for longer.",
)
@_number("--api-workers", int, Defaults.api_workers)
@_number(
    "--telemetry-ttl-seconds",
    float,
    Defaults.telemetry_ttl_seconds,
    "GPUs of a node whose agent has been silent longer are not used.",
)
@_number(
    "--observed-settle-seconds",
    float,
    Defaults.observed_settle_seconds,
    "A job's reported rate that has not changed since its co-tenants did counts for them after this "
    "long (its agent's rate window has forgotten the previous ones); so does its busy fraction alone.",
)
@_choice(
    "--binding",
    Binding,
    Defaults.binding,
    "How pods get their GPU, for DLJobs without spec.binding: env (nodeSelector + "
    "NVIDIA_VISIBLE_DEVICES), dra (a ResourceClaim per GPU; needs resource.k8s.io/v1 and "
    "NVIDIA's DRA driver) or reserve (a reservation pod per GPU asks NVIDIA's device plugin for it).",
)
@click.option(
    "--reservation-image",
    default=Defaults.reservation_image,
    show_default=True,
    envvar="HORUS_RESERVATION_IMAGE",
    help="reserve binding: the reservation pods' image (the operator's own: it runs `horus reserve`).",
)
@click.option(
    "--reservation-runtime-class",
    default="",
    envvar="HORUS_RESERVATION_RUNTIME_CLASS",
    help="reserve binding: the reservation pods' runtimeClassName (e.g. nvidia) [default: none].",
)
@click.option(
    "--reservation-priority-class",
    default="",
    envvar="HORUS_RESERVATION_PRIORITY_CLASS",
    help="reserve binding: the reservation pods' priorityClassName [default: none].",
)
@_choice(
    "--reservation-device-mode",
    DeviceMode,
    Defaults.reservation_device_mode,
    "reserve binding: how the job's pods are told the reserved GPU: env (NVIDIA_VISIBLE_DEVICES=UUID) "
    "or cdi (the CDI device annotation nvidia.com/gpu=UUID, NVIDIA_VISIBLE_DEVICES=void; needs a container "
    "runtime that honours a pod's cdi.k8s.io/ annotations). Only cdi offers reserve to pods of the pod "
    "route.",
)
@_choice(
    "--sharing",
    Sharing,
    Defaults.sharing,
    "How co-tenants share a GPU. mps: DRA-bound ones through their claim's MPS daemon with limits "
    "from their predictions (the driver's MPSSupport feature gate), and placement trusts the model's "
    "overlap for env-bound ones too (nodes that run MPS for them). timeslicing: the driver's "
    "time-slicing, and placement keeps every GPU's co-tenants within its time. auto: mps for DRA-bound "
    "co-tenants, time-slicing for env-bound ones, which have no MPS daemon.",
)
@_number(
    "--migration-over-limit-seconds",
    float,
    Defaults.migration_over_limit_seconds,
    "Move a job that allows it once its observed slowdown has stayed above maxSlowdown this long.",
)
@_number(
    "--migration-restart-cost-seconds",
    float,
    Defaults.migration_restart_cost_seconds,
    "Progress a move costs beyond the grace period; a re-pack must gain more, with the grace.",
)
@_number(
    "--migration-cooldown-seconds",
    float,
    Defaults.migration_cooldown_seconds,
    "At most one move per job per this many seconds.",
)
@_number("--migration-max-moves", int, Defaults.migration_max_moves, "Moves per job over its life.")
@queue_options(environment=True)
@_number(
    "--preemption-min-run-seconds",
    float,
    Defaults.preemption_min_run_seconds,
    "Under --queue-order las, a (re)started job runs this long before it may be preempted (and at "
    "least 4x its grace period plus the migration restart cost).",
)
@click.option(
    "--metrics-port",
    type=int,
    default=Defaults.metrics_port,
    show_default=True,
    envvar="HORUS_METRICS_PORT",
    help="Port of the Prometheus /metrics endpoint; 0 turns it off.",
)
@click.option(
    "--webhook-port",
    type=int,
    envvar="HORUS_WEBHOOK_PORT",
    help="Serve the pod admission webhook on this port and place labelled pods of any controller "
    '(docs/operator.md, "Pods of other controllers") [default: off].',
)
@click.option("--webhook-addr", default=Defaults.webhook_addr, show_default=True, envvar="HORUS_WEBHOOK_ADDR")
@click.option(
    "--webhook-host", envvar="HORUS_WEBHOOK_HOST", help="The name the API server reaches the webhook by."
)
@click.option(
    "--webhook-cert",
    type=click.Path(dir_okay=False),
    envvar="HORUS_WEBHOOK_CERT",
    help="The webhook's serving certificate (PEM), re-read when it changes.",
)
@click.option("--webhook-key", type=click.Path(dir_okay=False), envvar="HORUS_WEBHOOK_KEY")
@click.option("--liveness", default="http://0.0.0.0:8080/healthz", show_default=True, envvar="HORUS_LIVENESS")
@click.option("--log-format", type=click.Choice(["json", "plain"]), default="json", show_default=True)
@click.option("--verbose", "-v", is_flag=True)
def run(
    *,
    models: str | None,
    policy: str,
    namespace: str | None,
    all_namespaces: bool,
    lease_namespace: str,
    identity: str | None,
    resync_seconds: float,
    unschedulable_grace_seconds: float,
    not_ready_grace_seconds: float,
    api_workers: int,
    telemetry_ttl_seconds: float,
    observed_settle_seconds: float,
    binding: str,
    reservation_image: str,
    reservation_runtime_class: str,
    reservation_priority_class: str,
    reservation_device_mode: str,
    sharing: str,
    migration_over_limit_seconds: float,
    migration_restart_cost_seconds: float,
    migration_cooldown_seconds: float,
    migration_max_moves: int,
    queue_order: str,
    max_wait_seconds: float,
    starvation_multiple: float | None,
    preemption_min_run_seconds: float,
    metrics_port: int,
    webhook_port: int | None,
    webhook_addr: str,
    webhook_host: str | None,
    webhook_cert: str | None,
    webhook_key: str | None,
    liveness: str,
    log_format: str,
    verbose: bool,
) -> None:
    """Run the Horus operator: watch DLJobs, place them on GPUs, report in their status."""
    from horus_operator.operator import entry

    config = Defaults(
        models_dir=models or None,
        policy=policy,
        namespace=None if all_namespaces else namespace or None,
        lease_namespace=lease_namespace,
        identity=identity or Defaults.identity,
        resync_seconds=resync_seconds,
        unschedulable_grace_seconds=unschedulable_grace_seconds,
        not_ready_grace_seconds=not_ready_grace_seconds,
        api_workers=api_workers,
        telemetry_ttl_seconds=telemetry_ttl_seconds,
        observed_settle_seconds=observed_settle_seconds,
        binding=Binding(binding),
        reservation_image=reservation_image,
        reservation_runtime_class=reservation_runtime_class,
        reservation_priority_class=reservation_priority_class,
        reservation_device_mode=DeviceMode(reservation_device_mode),
        sharing=Sharing(sharing),
        migration_restart_cost_seconds=migration_restart_cost_seconds,
        migration_cooldown_seconds=migration_cooldown_seconds,
        migration_over_limit_seconds=migration_over_limit_seconds,
        migration_max_moves=migration_max_moves,
        queue_order=queue_order,
        max_wait_seconds=max_wait_seconds,
        starvation_multiple=starvation_multiple,
        preemption_min_run_seconds=preemption_min_run_seconds,
        metrics_port=metrics_port,
        webhook_port=webhook_port,
        webhook_addr=webhook_addr,
        webhook_host=webhook_host,
        webhook_cert=webhook_cert,
        webhook_key=webhook_key,
    )
    if webhook_port is not None and not (webhook_cert and webhook_key):
        raise click.UsageError(
            "--webhook-port needs --webhook-cert and --webhook-key (the API server calls HTTPS)"
        )
    entry.run(config, liveness_endpoint=liveness or None, json_logs=log_format == "json", verbose=verbose)
