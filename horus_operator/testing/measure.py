"""What benchmarks read off a running local cluster and the operator process: the API server's own
request counters, a process's CPU seconds and resident memory, py-spy samples of the operator, and
objects created the way a GitOps tool applies many at once (parallel `kubectl create`)."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from horus_operator import devcluster


def create_in_parallel(
    cluster: devcluster.LocalCluster, namespace: str, items: list[dict[str, Any]], *, writers: int
) -> None:
    """Create `items` in `namespace` with `writers` kubectl processes at once, each a slice of them."""
    kubectl = [str(cluster.control_plane.binary("kubectl")), f"--kubeconfig={cluster.kubeconfig}"]
    argv = [*kubectl, "create", "-n", namespace, "-f", "-"]
    slices = [chunk for chunk in (items[i::writers] for i in range(writers)) if chunk]
    processes = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) for _ in slices
    ]
    for process, chunk in zip(processes, slices, strict=True):
        assert process.stdin is not None
        process.stdin.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": chunk}))
        process.stdin.close()
    if any(process.wait(timeout=900) != 0 for process in processes):
        raise RuntimeError(f"{namespace}: kubectl create failed")


def api_requests(cluster: devcluster.LocalCluster) -> collections.Counter[str]:
    """Requests the API server has served so far, by "VERB resource", from its own counters."""
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout
    served: collections.Counter[str] = collections.Counter()
    for line in metrics.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            served[f"{labels.get('verb')} {labels.get('resource')}"] += int(float(line.rsplit(" ", 1)[1]))
    return served


def per_object(
    before: collections.Counter[str], after: collections.Counter[str], objects: int
) -> dict[str, float]:
    """Requests per object between two `api_requests` readings (all clients: kubectl, schedulers, kwok),
    the kinds of request that came to at least one per ten objects."""
    grown = after - before
    return {kind: round(n / objects, 2) for kind, n in grown.most_common() if n >= objects / 10}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # reported in kB
    raise RuntimeError(f"process {pid} reports no VmRSS")


class OperatorProfile:
    """py-spy sampling one process into collapsed stacks ("frame;frame;... count" lines) until stopped."""

    def __init__(self, pid: int, path: Path) -> None:
        spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if spy is None:
            raise SystemExit("profiling the operator needs py-spy (pip install -e '.[dev]')")
        self.path = path
        # --gil: only threads running Python, so waits on sockets and queues are not counted as work
        argv = [spy, "record", "--pid", str(pid), "--rate", "50", "--gil", "--nonblocking", "--format", "raw"]
        self.process = subprocess.Popen([*argv, "--output", str(path)], stdout=subprocess.DEVNULL)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)  # py-spy writes what it sampled and exits
        self.process.wait(timeout=60)

    def top(self, count: int = 15) -> list[tuple[str, float, float]]:
        """(function, % of samples in it, % in it or what it called), most samples in it first."""
        own: collections.Counter[str] = collections.Counter()
        inclusive: collections.Counter[str] = collections.Counter()
        total = 0
        for line in self.path.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            frames = [frame.split(":")[0] for frame in stack.split(";")]  # "function (file" per frame
            total += int(samples)
            own[frames[-1]] += int(samples)
            for frame in set(frames):
                inclusive[frame] += int(samples)
        return [(f, 100 * n / total, 100 * inclusive[f] / total) for f, n in own.most_common(count)]

    def print_top(self, what: str) -> None:
        print(f"operator, Python on CPU while {what} (py-spy --gil): own %, inclusive %, function")
        for function, own, inclusive in self.top():
            print(f"{own:6.1f} {inclusive:6.1f}  {function})")
