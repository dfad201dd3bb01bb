"""`stop_all` stops exactly the recorded processes, newest first, and never a recycled pid."""

from __future__ import annotations

import os
import time
from pathlib import Path

from horus_operator.devcluster.processes import ProcessGroup, ProcessRecord


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 10
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_started_processes_are_recorded_in_order_and_stopped(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path)
    group.start("first", ["sleep", "60"], cwd=tmp_path)
    group.start("second", ["sh", "-c", "echo hello; exec sleep 60"], cwd=tmp_path)
    wait_for_file(group.log_path("second"))

    # A fresh object sees the same records: `horus cluster down` runs in another process than `up`.
    records = ProcessGroup(tmp_path).records()
    assert [record.name for record in records] == ["first", "second"]
    assert all(record.alive for record in records)

    group.stop_all()

    assert not any(record.alive for record in records)
    assert ProcessGroup(tmp_path).records() == []
    assert group.log_path("second").read_text() == "hello\n"


def test_a_process_stopped_with_term_in_its_own_group_leaves_no_child(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path)
    # The shell ignores nothing; its background child is in the same process group and dies with it.
    record = group.start("parent", ["sh", "-c", "sleep 60 & echo $! > child.pid; wait"], cwd=tmp_path)
    wait_for_file(tmp_path / "child.pid")
    child_pid = int((tmp_path / "child.pid").read_text())

    group.stop_all()

    assert not record.alive
    assert (
        not Path(f"/proc/{child_pid}").exists()
        or "Z" in Path(f"/proc/{child_pid}/stat").read_text().split()[2]
    )


def test_record_with_another_start_time_is_not_ours(tmp_path: Path) -> None:
    recycled = ProcessRecord("etcd", os.getpid(), "0", tmp_path / "00-etcd.pid")
    assert not recycled.alive


def test_a_restarted_process_replaces_the_old_one_under_its_pid_file(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path)
    group.start("first", ["sleep", "60"], cwd=tmp_path)
    old = group.start("second", ["sleep", "60"], cwd=tmp_path)

    group.kill(old)
    new = group.respawn(old, ["sleep", "61"], cwd=tmp_path)

    assert not old.alive and new.alive
    assert (new.name, new.pid_file) == (old.name, old.pid_file)
    assert [record.name for record in ProcessGroup(tmp_path).records()] == ["first", "second"]
    group.stop_all()
    assert not new.alive
