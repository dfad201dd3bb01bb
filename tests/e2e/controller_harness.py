"""What the e2e tests that run another project's controller manager (Kueue, JobSet, Kubeflow Trainer,
built from their Go modules) share: its readiness, and its log when it fails."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path


def ready(process: subprocess.Popen[bytes] | None, health_port: int, name: str, log_path: Path) -> bool:
    """The manager's readiness probe passes (its webhook server listens); AssertionError with its log when
    it exited."""
    if process is None or process.poll() is not None:
        raise AssertionError(f"{name}'s manager exited; log:\n{log_tail(log_path)}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def log_tail(log_path: Path, lines: int = 60) -> str:
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])
