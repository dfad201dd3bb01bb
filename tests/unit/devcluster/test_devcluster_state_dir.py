"""`down` removes only a directory that `up` made."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus_operator.devcluster import ClusterError, LocalCluster


def test_down_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")

    with pytest.raises(ClusterError, match="not a horus cluster state directory"):
        LocalCluster(tmp_path).down()

    assert precious.read_text() == "keep me"


def test_down_removes_a_stopped_clusters_state_dir(tmp_path: Path) -> None:
    state_dir = tmp_path / "cluster"
    (state_dir / "logs").mkdir(parents=True)
    (state_dir / "cluster.json").write_text("{}")

    LocalCluster(state_dir).down()

    assert not state_dir.exists()


def test_down_of_a_missing_directory_is_a_no_op(tmp_path: Path) -> None:
    LocalCluster(tmp_path / "never-made").down()
