"""The compiled helm (hack/build-helm.sh, cached like the control plane) and the chart's renderings.

`helm_binary()` builds helm on first use (the script exits at once when it is built) and returns its
path; `run_helm()` runs it with a state directory of its own (no ~/.config/helm, no repositories);
`render()` is `helm template` parsed into objects."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from horus_operator.testing.operator_process import REPO

CHART = REPO / "charts" / "horus"
RELEASE = "horus"
Key = tuple[str, str, str, str]  # apiVersion, kind, namespace ("" when cluster-scoped), name


@functools.cache
def helm_binary() -> Path:
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "build-helm.sh")], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        raise RuntimeError(f"hack/build-helm.sh failed ({built.returncode}): {built.stderr[-2000:]}")
    return Path(built.stdout.strip().splitlines()[-1])


def run_helm(
    *args: str, state: Path, kubeconfig: Path | None = None, check: bool = True, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(state / "cache"),
        "HELM_CONFIG_HOME": str(state / "config"),
        "HELM_DATA_HOME": str(state / "data"),
    }
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def render(*values: str, state: Path) -> dict[Key, dict[str, Any]]:
    """The chart's objects with `values` (`--set a.b=c` pairs), CRDs included, keyed like `by_key`."""
    sets = [arg for value in values for arg in ("--set", value)]
    out = run_helm("template", RELEASE, str(CHART), "--include-crds", *sets, state=state).stdout
    return by_key(yaml.safe_load_all(out))


def by_key(documents: Any) -> dict[Key, dict[str, Any]]:
    objects: dict[Key, dict[str, Any]] = {}
    for document in documents:
        if not document:
            continue
        metadata = document["metadata"]
        key = (document["apiVersion"], document["kind"], metadata.get("namespace", ""), metadata["name"])
        assert key not in objects, f"rendered twice: {key}"
        objects[key] = document
    return objects
