"""Compile the scheduling core and the simulator's event loop with mypyc (`make compiled`).

mypyc (part of mypy, already the project's type checker) turns the type-annotated modules below into C
extensions that Python imports in place of their sources: the same code, decisions byte for byte the
same (`make test-compiled` checks it), at about 1.7x the speed of the interpreted simulator
(docs/benchmarks.md). The modules are the pure placement core and the simulator's per-event code: what
every event of `horus simulate` and every decision of the operator runs. Nothing else changes, and the
interpreted sources stay the reference (CI's main suites run them).

    .venv/bin/python hack/compile.py            # build beside the sources (make compiled)
    .venv/bin/python hack/compile.py --clean    # remove the build (make uncompiled)
    .venv/bin/python hack/compile.py --tree DIR # copy the tracked files to DIR and build there

Python imports an extension module before a source of the same name, so a build left beside sources
edited since would run old code: the build records each source's digest (`horus_operator/_compiled.sha256`)
and `import horus_operator` refuses a build whose sources changed, naming the fix.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "horus_operator"
MANIFEST = f"{PACKAGE}/_compiled.sha256"  # read by horus_operator/__init__.py
GROUP = f"{PACKAGE}._native"  # one shared library, horus_operator/_native__mypyc*.so, for all modules
# The placement core (all of placement/ but the test predictor `fake.py`) and the simulator's modules that
# every event runs through; the simulator's loaders, reports and plots stay interpreted.
PLACEMENT_LEFT_OUT = ("__init__.py", "fake.py")
SIMULATOR = (
    "engine",
    "state",
    "horizon",
    "learning",
    "migration",
    "oracle",
    "preemption",
    "truth",
    "durations",
)


def modules(root: Path) -> list[Path]:
    placement = sorted(
        path for path in (root / PACKAGE / "placement").glob("*.py") if path.name not in PLACEMENT_LEFT_OUT
    )
    return placement + [root / PACKAGE / "sim" / f"{name}.py" for name in SIMULATOR]


def build(root: Path) -> None:
    """Compiles `modules(root)` beside their sources; C files, objects and libraries are built in
    out/compiled-build."""
    try:
        from mypyc.build import mypycify
        from setuptools import Distribution
    except ImportError as missing:
        sys.exit(f"hack/compile.py: {missing.name} is missing; it comes with the dev extras (`make setup`)")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        sys.exit(f"hack/compile.py: no C compiler ({compiler}) on PATH; hack/install-deps.sh installs gcc")

    work = root / "out" / "compiled-build"
    sources = [str(path.relative_to(root)) for path in modules(root)]
    os.chdir(root)  # mypy reads its settings (pyproject.toml) from here; build_ext --inplace writes here
    extensions = mypycify(sources, group_name=GROUP, target_dir=str(work / "c"))
    # No project metadata: this builds extensions only, and pyproject.toml's is the wheel's.
    distribution = Distribution({"name": "horus-operator-compiled", "ext_modules": extensions})
    distribution.script_args = [
        "build_ext",
        "--inplace",
        "--build-temp",
        str(work / "temp"),
        "--build-lib",
        str(work / "lib"),
        "--parallel",
        str(os.cpu_count() or 1),
    ]
    distribution.parse_command_line()
    distribution.run_commands()
    (root / MANIFEST).write_text("".join(f"{_digest(root / name)}  {name}\n" for name in sources))


def clean(root: Path) -> None:
    for path in (root / PACKAGE).rglob("*.so"):
        path.unlink()
    (root / MANIFEST).unlink(missing_ok=True)


def copy_tree(root: Path, tree: Path) -> None:
    """The tracked files of `root` (what a clean clone has) into a fresh `tree`."""
    shutil.rmtree(tree, ignore_errors=True)
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--clean", action="store_true", help="remove the build")
    action.add_argument("--tree", type=Path, help="copy the tracked files here and build there")
    args = parser.parse_args()
    if args.clean:
        clean(ROOT)
        return
    root = ROOT
    if args.tree:
        root = args.tree.resolve()
        copy_tree(ROOT, root)
    clean(root)
    build(root)
    print(f"compiled {len(modules(root))} modules in {root / PACKAGE}", file=sys.stderr)


if __name__ == "__main__":
    main()
