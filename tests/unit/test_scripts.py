"""The project's shell scripts hold no pipeline that a reader stopping early can fail.

Under `set -o pipefail` a pipeline fails when any member does; a reader that exits after what it
needs (`head`, `grep -q`, `grep -m`, `sed …q`) leaves the writer to die of SIGPIPE (exit 141), a
race that passes on one machine and fails CI on the next. Capture the output instead and cut it in
the shell (`out=$(cmd); echo "${out%%$'\\n'*}"`).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EARLY_READER = re.compile(r"\|\s*(head\b|tail\s+-q|grep\s+(-\w*[qm]|--quiet|--max-count)|sed\s+-n\s+'?\d*q)")


def shell_sources() -> list[Path]:
    scripts = [*REPO.glob("hack/**/*.sh"), *REPO.glob(".ci/*"), REPO / "Makefile"]
    return [path for path in scripts if path.is_file()]


def test_the_scripts_are_found() -> None:
    names = {path.name for path in shell_sources()}
    assert {"build-control-plane.sh", "demo.sh", "run", "Makefile"} <= names


def test_no_pipeline_ends_in_a_reader_that_stops_early() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in shell_sources()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and EARLY_READER.search(line)
    ]
    assert offenders == []


def test_the_pattern_catches_the_old_etcd_line() -> None:
    assert EARLY_READER.search('"$BIN/etcd" --version | head -1')
    assert EARLY_READER.search("kubectl get pods | grep -q Running")
    assert not EARLY_READER.search("kubectl get nodes | awk '{s += $1} END {print s}'")
