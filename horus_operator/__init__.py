"""Horus: an interference-aware GPU scheduler for deep-learning training jobs on Kubernetes.

Layout (the rule is written in `.importlinter` and checked by `make lint`):
- `prediction/` and `placement/` are the pure core: no Kubernetes, no processes, no clocks of their own.
- `operator/`, `agent/`, `sim/`, `devcluster/` are shells around that core; `commands/` and `cli.py`
  are the command line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__version__ = "0.1.0"


def _refuse_a_stale_build(package: Path) -> None:
    """`make compiled` (hack/compile.py) puts C extensions beside their sources, and Python imports an
    extension before a source of the same name: one built before its source was edited would run old
    code. The build lists each source's digest; a source that no longer matches stops the import."""
    manifest = package / "_compiled.sha256"
    if not manifest.exists():
        return  # interpreted: the usual case
    for line in manifest.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        source = package.parent / name
        if not source.exists() or hashlib.sha256(source.read_bytes()).hexdigest() != digest:
            raise ImportError(
                f"{name} changed since `make compiled` built it: run `make compiled` again, "
                "or `make uncompiled` to run the sources"
            )


_refuse_a_stale_build(Path(__file__).parent)
