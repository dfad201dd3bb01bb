"""`import horus_operator` refuses a compiled build (`make compiled`) whose sources changed since."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from horus_operator import _refuse_a_stale_build


def built(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "horus_operator"
    (package / "placement").mkdir(parents=True)
    (package / "placement" / "index.py").write_text(source)
    digest = hashlib.sha256(source.encode()).hexdigest()
    (package / "_compiled.sha256").write_text(f"{digest}  horus_operator/placement/index.py\n")
    return package


def test_sources_as_built_and_no_build_at_all_import(tmp_path: Path) -> None:
    _refuse_a_stale_build(built(tmp_path, "x = 1\n"))
    _refuse_a_stale_build(tmp_path / "elsewhere")


def test_a_source_edited_since_the_build_names_it_and_the_fix(tmp_path: Path) -> None:
    package = built(tmp_path, "x = 1\n")
    (package / "placement" / "index.py").write_text("x = 2\n")
    with pytest.raises(ImportError, match=r"horus_operator/placement/index.py changed since `make compiled`"):
        _refuse_a_stale_build(package)
