"""Background processes that outlive the command that started them, and stop exactly those.

Each process runs in a session (and so a process group) of its own, writes its output to
`<state>/logs/<name>.log`, and is recorded in `<state>/run/<NN>-<name>.pid` (NN: start order) as
"pid start-time". The start
time (from /proc) guards against a recycled pid: `stop` signals a group only while the recorded
process is still the one we started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_SECONDS = 10.0


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot), or None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    after_name = stat.rsplit(")", 1)[1].split()
    if after_name[0] == "Z":  # a zombie has exited; only its parent's wait() remains
        return None
    return after_name[19]


@dataclass(frozen=True)
class ProcessRecord:
    """One started process, as its pid file records it."""

    name: str
    pid: int
    start_time: str
    pid_file: Path

    @property
    def alive(self) -> bool:
        return _start_time(self.pid) == self.start_time


class ProcessGroup:
    """The processes of one state directory, started in order and stopped in reverse."""

    def __init__(self, state_dir: Path) -> None:
        self.run_dir = state_dir / "run"
        self.log_dir = state_dir / "logs"
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(self, name: str, argv: Sequence[str | os.PathLike[str]], cwd: Path) -> ProcessRecord:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        order = len(list(self.run_dir.glob("*.pid")))
        return self._spawn(name, argv, cwd, self.run_dir / f"{order:02d}-{name}.pid")

    def _spawn(
        self, name: str, argv: Sequence[str | os.PathLike[str]], cwd: Path, pid_file: Path
    ) -> ProcessRecord:
        with self.log_path(name).open("ab") as log:
            child = subprocess.Popen(
                [os.fspath(arg) for arg in argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,  # own process group; Ctrl-C in the terminal does not reach it
            )
        start_time = _start_time(child.pid)
        record = ProcessRecord(name, child.pid, start_time or "exited", pid_file)
        record.pid_file.write_text(f"{record.pid} {record.start_time}\n")
        self._children[child.pid] = child
        return record

    def kill(self, record: ProcessRecord) -> None:
        """SIGKILL `record`'s group (a crash, not a shutdown) and wait until it is gone; its pid file
        stays, for `respawn`."""
        if record.alive:
            _signal_group(record.pid, signal.SIGKILL)
            self._wait_gone(record, STOP_GRACE_SECONDS)
        self._reap(record.pid)

    def respawn(
        self, record: ProcessRecord, argv: Sequence[str | os.PathLike[str]], cwd: Path
    ) -> ProcessRecord:
        """Start `argv` in place of the dead `record`, under the same pid file, so start order and
        `stop_all` stay as they were."""
        return self._spawn(record.name, argv, cwd, record.pid_file)

    def records(self) -> list[ProcessRecord]:
        """Recorded processes in start order."""
        if not self.run_dir.is_dir():
            return []
        records = []
        for pid_file in sorted(self.run_dir.glob("*.pid")):
            pid, start_time = pid_file.read_text().split()
            records.append(ProcessRecord(pid_file.stem.split("-", 1)[1], int(pid), start_time, pid_file))
        return records

    def exit_code(self, record: ProcessRecord) -> int | None:
        """Exit status of a process this object started, None while it runs (or if not ours)."""
        child = self._children.get(record.pid)
        return None if child is None else child.poll()

    def stop_all(self) -> None:
        """SIGTERM each live group, newest first; SIGKILL what is left after the grace period."""
        for record in reversed(self.records()):
            self._stop(record)
            record.pid_file.unlink(missing_ok=True)

    def _stop(self, record: ProcessRecord) -> None:
        if not record.alive:
            self._reap(record.pid)
            return
        _signal_group(record.pid, signal.SIGTERM)
        if self._wait_gone(record, STOP_GRACE_SECONDS):
            return
        _signal_group(record.pid, signal.SIGKILL)
        self._wait_gone(record, STOP_GRACE_SECONDS)

    def _wait_gone(self, record: ProcessRecord, timeout: float) -> bool:
        """Wait until the recorded process and every other live member of its group have exited
        (a signalled child may still be running when its group leader is already gone)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._reap(record.pid)
            if not record.alive and not _live_members(record.pid):
                return True
            time.sleep(0.05)
        return False

    def _reap(self, pid: int) -> None:
        child = self._children.get(pid)
        if child is not None:
            child.poll()


def _live_members(pgid: int) -> list[int]:
    """Pids of the running (not zombie) processes in process group `pgid`, from /proc."""
    members = []
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat_path.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # exited while we looked
        if after_name[0] != "Z" and int(after_name[2]) == pgid:  # fields 3 (state) and 5 (pgrp)
            members.append(int(stat_path.parent.name))
    return members


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # exited between the check and the signal
        os.killpg(pgid, signum)
