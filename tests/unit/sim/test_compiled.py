"""The compiled build (`make compiled`, hack/compile.py) decides byte for byte as the sources do.

Runs only where this test process imports that build (`make test-compiled`): each simulation below runs
here, compiled, and in a subprocess on a copy of the same sources alone, and every output file must be
equal. The simulations are the ones the simulator's speed rounds compared (docs/benchmarks.md): the
three policies plain, with online learning and migration, with las's preemption, and a longer queue.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import horus_operator
from horus_operator.cli import main

COMPILED = importlib.util.find_spec("horus_operator._native__mypyc") is not None
pytestmark = pytest.mark.skipif(not COMPILED, reason="the sources run here; `make test-compiled` runs this")

POLICIES = ["--policy", "horus,exclusive,binpack"]
RUNS = {
    "plain": ["--workload", "horus-2500", *POLICIES],
    "learning-migration": ["--workload", "horus-2500", "--online-learning", "--migration", *POLICIES],
    # las preempts in the engine whatever the policy: the quickest policy shows it (three take a minute)
    "las": ["--workload", "horus-2500", "--queue-order", "las", "--policy", "exclusive"],
    "long-queue": [
        "--workload",
        "gavel-generator",
        "--jobs",
        "3000",
        "--gpus",
        "256",
        "--seed",
        "2",
        *POLICIES,
    ],
}

# The command line on the sources alone: it refuses to run where it would import the build.
INTERPRETED_CLI = (
    "import importlib.util; assert importlib.util.find_spec('horus_operator._native__mypyc') is None; "
    "from horus_operator.cli import main; main()"
)


def interpreted_copy(tmp_path: Path) -> Path:
    """The package's sources without the build, beside the project's measured data (the default truth)."""
    package = Path(horus_operator.__file__).parent
    root = tmp_path / "sources"
    shutil.copytree(
        package,
        root / "horus_operator",
        ignore=shutil.ignore_patterns("*.so", "_compiled.sha256", "__pycache__"),
    )
    (root / "data").symlink_to(package.parent / "data")
    return root


def outputs(directory: Path, root: Path) -> dict[str, bytes]:
    """Every file a run wrote, with its own directory's and the sources' paths taken out (details.json
    records where the output and the default truth are)."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        .replace(str(directory).encode(), b"OUT")
        .replace(str(root).encode(), b"ROOT")
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.suffix != ".png"
    }


@pytest.mark.parametrize("name", list(RUNS))
def test_the_compiled_simulator_writes_what_the_sources_write(tmp_path: Path, name: str) -> None:
    arguments = ["simulate", *RUNS[name]]
    compiled, interpreted = tmp_path / "compiled", tmp_path / "interpreted"
    result = CliRunner().invoke(main, [*arguments, "--output", str(compiled)])
    assert result.exit_code == 0, result.output
    sources = interpreted_copy(tmp_path)
    run = subprocess.run(
        [sys.executable, "-c", INTERPRETED_CLI, *arguments, "--output", str(interpreted)],
        cwd=sources,  # `-c` puts the working directory first on the path
        env={**os.environ, "PYTHONPATH": str(sources)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert outputs(compiled, Path(horus_operator.__file__).parent.parent) == outputs(interpreted, sources)
