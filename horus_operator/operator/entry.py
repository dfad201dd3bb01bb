"""Runs the kopf operator in this process (what `horus run` and the Deployment start)."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import time

import kopf

from horus_operator.api import keys
from horus_operator.operator import (
    handlers,  # noqa: F401  (importing registers the handlers)
    kube,
)
from horus_operator.operator.apierrors import ApiUnavailable
from horus_operator.operator.config import OperatorConfig
from horus_operator.operator.telemetry import handlers as _telemetry_handlers  # noqa: F401  (GPUNodes)

log = logging.getLogger(__name__)
DISCOVERY_ATTEMPTS = 30  # two seconds apart: the API server may come up after the operator


def run(config: OperatorConfig, *, liveness_endpoint: str | None, json_logs: bool, verbose: bool) -> None:
    """Blocks until SIGINT/SIGTERM. `config` reaches the start-up handler in kopf's memo."""
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL)
    config = _with_dra(config)
    if config.pod_route:  # the webhook and the managed pods' watch (kopf wants a server for the one)
        importlib.import_module("horus_operator.operator.podroute.handlers")
    kopf.run(
        standalone=True,  # replicas coordinate through the Lease, not kopf peering
        clusterwide=config.namespace is None,
        namespaces=[config.namespace] if config.namespace else (),
        liveness_endpoint=liveness_endpoint,
        memo=kopf.Memo(config=config),
    )


def _with_dra(config: OperatorConfig) -> OperatorConfig:
    """Where the API server serves resource.k8s.io/v1, watch ResourceClaims and ResourceSlices (their
    handlers registered before kopf starts its watches); without it, refuse `--binding dra`."""
    served = _serves_dra()
    if not served and config.binding == "dra":
        raise SystemExit(f"horus run --binding dra: the API server does not serve {keys.DRA_API_VERSION}")
    if served:
        importlib.import_module("horus_operator.operator.dra.handlers")
    log.info(
        "%s %s: DRA binding %s",
        keys.DRA_API_VERSION,
        "served" if served else "not served",
        "available" if served else "off",
    )
    return dataclasses.replace(config, dra_served=served)


def _serves_dra() -> bool:
    client = kube.load_client(pool_size=1)
    for attempt in range(DISCOVERY_ATTEMPTS):
        try:
            return kube.serves(client, keys.DRA_API_VERSION)
        except ApiUnavailable as error:
            if attempt == DISCOVERY_ATTEMPTS - 1:
                raise
            log.warning("API discovery failed, retrying: %s", error)
            time.sleep(2.0)
    return False
