"""Runs the kopf operator in this process (what `horus run` and the Deployment start)."""

from __future__ import annotations

import kopf

from horus_operator.operator import (
    handlers,  # noqa: F401  (importing registers the handlers)
    observed_handlers,  # noqa: F401  (GPUNode telemetry, observed status)
)
from horus_operator.operator.config import OperatorConfig


def run(config: OperatorConfig, *, liveness_endpoint: str | None, json_logs: bool, verbose: bool) -> None:
    """Blocks until SIGINT/SIGTERM. `config` reaches the start-up handler in kopf's memo."""
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL)
    kopf.run(
        standalone=True,  # replicas coordinate through the Lease, not kopf peering
        clusterwide=config.namespace is None,
        namespaces=[config.namespace] if config.namespace else (),
        liveness_endpoint=liveness_endpoint,
        memo=kopf.Memo(config=config),
    )
