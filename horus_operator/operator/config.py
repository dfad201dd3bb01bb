"""Operator settings: every one has an environment variable (the Deployment sets them) and a `horus run`
flag (which sets the variable)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class OperatorConfig:
    models_dir: str | None = None  # None: the models shipped in the package
    policy: str = "horus"
    namespace: str | None = None  # None: all namespaces
    lease_namespace: str = "horus-system"
    identity: str = socket.gethostname()
    resync_seconds: float = 10.0
    unschedulable_grace_seconds: float = 30.0
    api_workers: int = 32
    telemetry_ttl_seconds: float = 60.0  # a GPUNode older than this: its agent is silent, GPUs unusable

    @property
    def unschedulable_grace(self) -> timedelta:
        return timedelta(seconds=self.unschedulable_grace_seconds)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> OperatorConfig:
        defaults = cls()
        return cls(
            models_dir=env.get("HORUS_MODELS") or None,
            policy=env.get("HORUS_POLICY", defaults.policy),
            namespace=env.get("HORUS_NAMESPACE") or None,
            lease_namespace=env.get("HORUS_LEASE_NAMESPACE", defaults.lease_namespace),
            identity=env.get("HORUS_IDENTITY") or defaults.identity,
            resync_seconds=float(env.get("HORUS_RESYNC_SECONDS", defaults.resync_seconds)),
            unschedulable_grace_seconds=float(
                env.get("HORUS_UNSCHEDULABLE_GRACE_SECONDS", defaults.unschedulable_grace_seconds)
            ),
            api_workers=int(env.get("HORUS_API_WORKERS", defaults.api_workers)),
            telemetry_ttl_seconds=float(
                env.get("HORUS_TELEMETRY_TTL_SECONDS", defaults.telemetry_ttl_seconds)
            ),
        )
