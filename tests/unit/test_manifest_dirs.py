"""`kubectl apply -f crds/` and `kubectl apply -k crds/` both work (issue 14: a `kustomization.yaml` in
crds/ made `-f` fail on the Kustomization itself); the same for examples/. manifests/ is `-k` only (its
CRDs live in ../crds), so nothing may tell users to apply it with `-f`.

Static checks of what kubectl and kustomize read; the e2e dry runs in tests/e2e/test_manifests.py check
the same paths against a real API server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
APPLY_F_DIRS = ("crds", "examples")  # directories users may apply with -f as well as -k
KUBECTL_F_SUFFIXES = {".yaml", ".yml", ".json"}  # what `kubectl apply -f DIR` reads; it skips the rest
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")  # kustomize's


def _kubectl_f_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in KUBECTL_F_SUFFIXES)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _kustomization(directory: Path) -> dict[str, Any]:
    found = [directory / name for name in KUSTOMIZATION_NAMES if (directory / name).is_file()]
    assert len(found) == 1, f"{directory}: kustomize wants exactly one of {KUSTOMIZATION_NAMES}: {found}"
    return yaml.safe_load(found[0].read_text())


@pytest.mark.parametrize("name", APPLY_F_DIRS)
def test_every_file_apply_f_reads_is_a_kubernetes_object(name: str) -> None:
    for path in _kubectl_f_files(REPO / name):
        for document in _documents(path):
            assert {"apiVersion", "kind"} <= set(document), path
            assert document["kind"] != "Kustomization", f"`kubectl apply -f {name}/` would fail on {path}"


@pytest.mark.parametrize("name", APPLY_F_DIRS)
def test_apply_k_applies_the_same_files_as_apply_f(name: str) -> None:
    directory = REPO / name
    listed = sorted(directory / resource for resource in _kustomization(directory)["resources"])
    assert listed == _kubectl_f_files(directory)


def test_every_kustomization_manifests_includes_loads_under_the_default_load_restrictor() -> None:
    # kustomize refuses files outside a kustomization's own directory; other directories are fine when
    # they hold a kustomization of their own.
    manifests = REPO / "manifests"
    for resource in _kustomization(manifests)["resources"]:
        target = (manifests / resource).resolve()
        if target.is_dir():
            _kustomization(target)
        else:
            assert target.parent == manifests, resource


def _user_facing_text() -> list[Path]:
    paths = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "horus_operator").rglob("*.py")]
    others = (*(REPO / "hack").rglob("*"), *(REPO / "examples").iterdir())
    return paths + [p for p in others if p.is_file() and "__pycache__" not in p.parts]


def test_nothing_tells_users_to_apply_a_kustomize_only_directory_with_f() -> None:
    kustomize_only = [
        path.parent.name for path in REPO.glob("*/kustomization.y*ml") if path.parent.name not in APPLY_F_DIRS
    ]
    assert kustomize_only  # manifests/, at least: otherwise this test checks nothing
    pattern = re.compile(rf"apply\b[^\n`]*?-f\s+\S*\b({'|'.join(kustomize_only)})/?(\s|[`'\"]|$)")
    offenders = [
        f"{path.relative_to(REPO)}: {match.group(0).strip()}"
        for path in _user_facing_text()
        for match in pattern.finditer(path.read_text(errors="replace"))
    ]
    assert not offenders, "use `kubectl apply -k` for these:\n" + "\n".join(offenders)
