"""Where the compiled control plane lives, and how to build it.

`hack/build-control-plane.sh` compiles kube-apiserver, kube-scheduler, kube-controller-manager,
kubectl, etcd and kwok into a directory named by the pinned versions (`hack/control-plane.env`) and
writes a `.complete` stamp last; this module finds that directory the same way and runs the script
when the stamp is missing.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"
VERSIONS_FILE = REPO_ROOT / "hack" / "control-plane.env"
HORUS_STAGES_FILE = REPO_ROOT / "hack" / "kwok" / "bare-pod-stages.yaml"

# kwok's stock stages, relative to the copy the build script keeps in `<dir>/kwok-stages/`:
# nodes become Ready at once and keep their lease fresh; pods go Running at once. Pods end, and a
# pod marked for deletion is removed, only through HORUS_STAGES_FILE.
STOCK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
)


class ControlPlaneMissingError(RuntimeError):
    """The control-plane binaries are not built (run `make control-plane`)."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """`KEY=value` lines of the versions file, with HORUS_<KEY> environment overrides applied."""
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            versions[key.strip()] = os.environ.get(f"HORUS_{key.strip()}", value.strip())
    return versions


def cache_root() -> Path:
    """Same precedence as the build script: HORUS_CACHE, then XDG_CACHE_HOME/horus, then ~/.cache/horus."""
    if "HORUS_CACHE" in os.environ:
        return Path(os.environ["HORUS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "horus"


@dataclass(frozen=True)
class ControlPlane:
    """The versioned output directory of the build script."""

    root: Path

    @classmethod
    def pinned(cls) -> ControlPlane:
        versions = read_versions()
        name = f"{versions['K8S_VERSION']}-kwok-{versions['KWOK_VERSION']}"
        return cls(cache_root() / "control-plane" / name)

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def is_built(self) -> bool:
        return (self.root / ".complete").is_file()

    def binary(self, name: str) -> Path:
        """Path of a compiled binary; raises ControlPlaneMissingError when the build is incomplete."""
        if not (self.is_built and (self.bin_dir / name).is_file()):
            raise ControlPlaneMissingError(
                f"control plane not built in {self.root}: run `make control-plane` "
                f"(or `bash {BUILD_SCRIPT}`) first"
            )
        return self.bin_dir / name

    def stage_files(self) -> list[Path]:
        """kwok --config files: the stock stages from the kwok module plus Horus' bare-pod stages."""
        return [self.root / "kwok-stages" / stage for stage in STOCK_STAGES] + [HORUS_STAGES_FILE]

    def build(self) -> None:
        """Run the build script (prints progress; a no-op when the stamp exists)."""
        subprocess.run(["bash", str(BUILD_SCRIPT)], check=True)


def kubectl_path() -> Path:
    """The kubectl compiled with the control plane (same minor version as the API server)."""
    return ControlPlane.pinned().binary("kubectl")
