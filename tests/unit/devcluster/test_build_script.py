"""hack/build-control-plane.sh against a stand-in `go`: restartable, and immune to SIGPIPE.

The real build compiles for half an hour; these tests run the script itself with a `go` on PATH
that answers the few subcommands the script uses and "builds" small shell binaries. A failure can
be injected into one build (`FAKE_GO_FAIL=<package part>`), as a failed download or a full disk
would stop the real one; a count of builds shows what a rerun redoes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "hack" / "build-control-plane.sh"
BINARIES = ["kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl", "etcd", "kwok"]

FAKE_GO = r"""#!/usr/bin/env bash
set -eu
fake="$FAKE_GO_HOME"
case "$1 ${2:-}" in
  "mod download")
    printf '{\n\t"Path": "k8s.io/kubernetes",\n\t"GoMod": "%s",\n}\n' "$fake/kubernetes.mod" ;;
  "mod init"|"mod edit"|"get "*|"get -tool") ;;
  "list -m") echo "$fake/kwok-module" ;;
  "build -trimpath")
    out="" pkg="$(basename "$PWD"):${!#}"  # scratch module, then package
    while (($#)); do [[ "$1" == -o ]] && out="$2"; shift; done
    echo "$pkg" >> "$fake/builds.log"
    if [[ -n "${FAKE_GO_FAIL:-}" && "$pkg" == *"$FAKE_GO_FAIL"* ]]; then
      echo "half a binary" > "$out"; echo "fake go: build of $pkg failed" >&2; exit 1
    fi
    # The stand-in binary prints a long version text, as etcd does: a reader that stops after
    # the first line would leave it writing into a closed pipe.
    printf '#!/usr/bin/env bash\necho "%s version"\nseq 1 200000\n' "$pkg" > "$out"
    chmod +x "$out" ;;
  *) echo "fake go: unexpected: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "fake-go"
    (home / "bin").mkdir(parents=True)
    go = home / "bin" / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    (home / "kubernetes.mod").write_text(
        "module k8s.io/kubernetes\nrequire (\n\tgo.etcd.io/etcd/server/v3 v3.7.0\n)\n"
        "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n)\n"
    )
    stage = home / "kwok-module" / "kustomize" / "stage" / "pod"
    stage.mkdir(parents=True)
    (stage / "pod-ready.yaml").write_text("kind: Stage\n")
    return {
        **os.environ,
        "PATH": f"{home / 'bin'}:{os.environ['PATH']}",
        "FAKE_GO_HOME": str(home),
        "HORUS_CACHE": str(tmp_path / "cache"),
    }


def build(env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)], env={**env, **extra}, capture_output=True, text=True, timeout=120
    )


def output_dir(env: dict[str, str]) -> Path:
    (root,) = (Path(env["HORUS_CACHE"]) / "control-plane").iterdir()
    return root


def builds(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_GO_HOME"]) / "builds.log"
    return log.read_text().split() if log.exists() else []


def test_a_long_version_text_cut_short_does_not_fail_the_build(fake_go: dict[str, str]) -> None:
    # etcd's --version used to be piped into `head -1`: a race that pipefail turned into exit 141.
    for _ in range(3):
        for path in (Path(fake_go["HORUS_CACHE"]) / "control-plane").glob("*/.complete"):
            path.unlink()
        result = build(fake_go)
        assert result.returncode == 0, result.stderr
        assert "etcd:. version" in result.stdout  # etcd's first line is still shown


def test_a_complete_build_is_skipped(fake_go: dict[str, str]) -> None:
    assert build(fake_go).returncode == 0
    first = builds(fake_go)

    again = build(fake_go)

    assert again.returncode == 0 and "already built" in again.stdout
    assert builds(fake_go) == first
    assert sorted(p.name for p in (output_dir(fake_go) / "bin").iterdir()) == sorted(BINARIES)


def test_a_failed_build_leaves_no_half_binary_and_the_rerun_finishes_only_the_rest(
    fake_go: dict[str, str],
) -> None:
    failed = build(fake_go, FAKE_GO_FAIL="etcd:")
    assert failed.returncode != 0
    root = output_dir(fake_go)
    assert not (root / ".complete").exists()
    assert not (root / "bin" / "etcd").exists()
    assert (root / "bin" / "kube-apiserver").exists()
    built_before = len(builds(fake_go))

    rerun = build(fake_go)

    assert rerun.returncode == 0, rerun.stderr
    assert (root / ".complete").exists()
    assert builds(fake_go)[built_before:] == ["etcd:.", "kwok:sigs.k8s.io/kwok/cmd/kwok"]
    assert not list((root / "bin").glob(".*.tmp"))


def test_half_copied_kwok_stages_are_redone(fake_go: dict[str, str]) -> None:
    assert build(fake_go).returncode == 0
    root = output_dir(fake_go)
    # A run killed between building kwok and renaming its stages into place.
    (root / ".complete").unlink()
    (root / "bin" / "kwok").unlink()
    (root / ".kwok-stages.tmp").mkdir()

    assert build(fake_go).returncode == 0
    assert (root / "kwok-stages" / "pod" / "pod-ready.yaml").is_file()
    assert not (root / ".kwok-stages.tmp").exists()
