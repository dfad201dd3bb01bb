"""The Python side finds the build script's output directory by the same pinned versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus_operator.devcluster import binaries


def test_versions_file_and_environment_override(monkeypatch: pytest.MonkeyPatch) -> None:
    assert binaries.read_versions()["K8S_VERSION"].startswith("v1.")
    monkeypatch.setenv("HORUS_KWOK_VERSION", "v9.9.9")
    assert binaries.read_versions()["KWOK_VERSION"] == "v9.9.9"


def test_pinned_directory_follows_horus_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HORUS_CACHE", str(tmp_path))
    versions = binaries.read_versions()

    control_plane = binaries.ControlPlane.pinned()

    expected = tmp_path / "control-plane" / f"{versions['K8S_VERSION']}-kwok-{versions['KWOK_VERSION']}"
    assert control_plane.root == expected


def test_missing_build_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(binaries.ControlPlaneMissingError, match="make control-plane"):
        binaries.ControlPlane(tmp_path).binary("kubectl")


def test_horus_stage_file_ships_with_the_repository() -> None:
    stage_files = binaries.ControlPlane(Path("/cache")).stage_files()
    assert stage_files[-1].is_file()
    assert "pod-complete.stage.kwok.x-k8s.io/delay" in stage_files[-1].read_text()
