"""Horus at scale on the local control plane: many fake GPU nodes, many long-running DLJobs.

In one fresh cluster of `--nodes` kwok nodes × `--gpus-per-node` GPUs, `--jobs` DLJobs (the benchmarks'
model mix, default maxSlowdown, no end: their pods run until deleted, so the cluster fills) are created in
stages by parallel `kubectl create`; after each stage the script waits until every job's pod is bound or
nothing more is bound for `--settle` seconds (the cluster is full: the rest queue), then samples the
operator. It reports
- placement inside the operator: the wall time of each placement decision (snapshot + scheduling cycle,
  before any pod is created; the operator logs it), per placed job and per decision;
- DLJob → bound pod: from this script's watch seeing the DLJob to its watch seeing the pod's node set;
- the operator's resident memory and CPU seconds after each stage, and memory growth per job (a
  least-squares line through the samples, and each stage's increment, to show whether it is linear);
- API requests per bound job, from the API server's own `apiserver_request_total` (all clients), with the
  node leases and node status kwok keeps up for every node shown apart as background;
- how many jobs were placed and bound, and in which phase the others wait.

Usage: .venv/bin/python bench/scale.py [--nodes 1000] [--jobs 10000] [--stages 0.1,0.25,0.5,1]
       [--out out/scale] [--profile-operator]
Writes <out>/scale.json and <out>/operator.log (and <out>/operator.stacks.txt when profiling).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import re
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.watch.watch import iter_resp_lines

from horus_operator import devcluster
from horus_operator.api import keys
from horus_operator.testing import measure
from horus_operator.testing.builders import bench_job
from horus_operator.testing.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench-scale"
BACKGROUND = ("leases", "nodes")  # kept up by kwok for every node, whatever the jobs do
# operator/loop.py: "placement: N placed, decided in X ms (Y ms CPU)" (the CPU since 4 December)
PLACEMENT_LINE = re.compile(r"placement: (\d+) placed, decided in ([\d.]+) ms(?: \(([\d.]+) ms CPU\))?")


class Watch(threading.Thread):
    """List, then watch, one kind of object, calling `seen(event_type, body)` for each; re-lists when the
    watch expires or fails. Raw JSON (the client's models cost more than the events)."""

    def __init__(self, list_call: Callable[..., Any], seen: Callable[[str, dict[str, Any]], None]) -> None:
        super().__init__(daemon=True)
        self._list, self._seen = list_call, seen
        self.stopping = threading.Event()

    def run(self) -> None:
        version = ""
        while not self.stopping.is_set():
            try:
                if not version:
                    listing = json.loads(self._list(_preload_content=False).data)
                    for item in listing["items"]:
                        self._seen("ADDED", item)
                    version = listing["metadata"]["resourceVersion"]
                version = self._follow(version)
            except Exception as error:  # the API server is busy or restarted: list again shortly
                if self.stopping.is_set():
                    return
                print(f"watch: {error!r}; listing again", flush=True)
                version = ""
                time.sleep(1.0)

    def _follow(self, version: str) -> str:
        """Watch from `version` until the server ends it; the version to go on from ("" to re-list)."""
        response = self._list(
            watch=True, resource_version=version, timeout_seconds=30, _preload_content=False
        )
        try:
            for line in iter_resp_lines(response):
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410 Gone: the version is too old
                    return ""
                version = event["object"]["metadata"]["resourceVersion"]
                self._seen(event["type"], event["object"])
                if self.stopping.is_set():
                    break
        finally:
            response.release_conn()
        return version


class Progress:
    """What the watches saw of each job, on this script's monotonic clock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.submitted: dict[str, float] = {}  # DLJob name -> first seen
        self.phase: dict[str, str] = {}  # DLJob name -> status.phase last seen
        self.placed: dict[str, float] = {}  # DLJob name -> its pod first seen (the operator created it)
        self.bound: dict[str, float] = {}  # DLJob name -> first seen with its pod's node set

    def dljob(self, event: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        with self.lock:
            self.submitted.setdefault(name, time.monotonic())
            self.phase[name] = (body.get("status") or {}).get("phase", "")

    def pod(self, event: str, body: dict[str, Any]) -> None:
        job = (body["metadata"].get("labels") or {}).get(keys.LABEL_JOB)
        if job is None or event == "DELETED":
            return
        with self.lock:
            self.placed.setdefault(job, time.monotonic())
            if (body.get("spec") or {}).get("nodeName"):
                self.bound.setdefault(job, time.monotonic())

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return len(self.submitted), len(self.placed), len(self.bound)

    def latencies_s(
        self, since: dict[str, float] | None = None, until: dict[str, float] | None = None
    ) -> list[float]:
        """Per bound job, from `since` (DLJob seen) to `until` (pod bound): the legs of DLJob -> bound
        are DLJob -> pod (the operator) and pod -> bound (kube-scheduler, and the API server between)."""
        with self.lock:
            since, until = since or self.submitted, until or self.bound
            return [until[job] - since[job] for job in self.bound if job in since and job in until]


@dataclass
class Sample:
    submitted: int
    placed: int
    bound: int
    rss_mib: float
    cpu_s: float
    at_s: float  # since the first job was created


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (`q` in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def decisions(log_text: str) -> list[tuple[int, float, float | None]]:
    """(jobs placed, wall ms, CPU ms or None) of every placement decision the operator logged."""
    return [
        (int(placed), float(wall), float(cpu) if cpu else None)
        for placed, wall, cpu in PLACEMENT_LINE.findall(log_text)
    ]


def wait_stage(progress: Progress, target: int, *, settle: float, timeout: float, started: float) -> None:
    """Until all `target` jobs are bound, or nothing more was bound for `settle` seconds."""
    last_bound, last_change, last_print = -1, time.monotonic(), 0.0
    deadline = time.monotonic() + timeout
    while True:
        submitted, placed, bound = progress.counts()
        now = time.monotonic()
        if bound != last_bound:
            last_bound, last_change = bound, now
        if now - last_print >= 10:
            last_print = now
            print(f"  {now - started:6.0f} s: {submitted} seen, {placed} placed, {bound} bound", flush=True)
        if bound >= target or now - last_change >= settle:
            return
        if now > deadline:
            raise TimeoutError(f"stage of {target} jobs: {bound} bound after {timeout:.0f} s")
        time.sleep(0.5)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys against xs."""
    slope = statistics.covariance(xs, ys) / statistics.variance(xs)
    return statistics.fmean(ys) - slope * statistics.fmean(xs), slope


def prepare(cluster: devcluster.LocalCluster, args: argparse.Namespace) -> None:
    """The control plane, the nodes, the CRDs and the namespace the jobs go to."""
    cluster.up()
    began = time.monotonic()
    cluster.add_pools([devcluster.GpuNodePool(count=args.nodes, gpus_per_node=args.gpus_per_node)])
    print(f"{args.nodes} nodes Ready in {time.monotonic() - began:.0f} s", flush=True)
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    cluster.kubectl("create", "namespace", NAMESPACE)


def watch_jobs(cluster: devcluster.LocalCluster, progress: Progress) -> list[Watch]:
    """Started watches of the DLJobs and of Horus's pods, feeding `progress`."""
    client = kubernetes.config.new_client_from_config(str(cluster.kubeconfig))
    core, custom = kubernetes.client.CoreV1Api(client), kubernetes.client.CustomObjectsApi(client)
    selector = f"{keys.LABEL_MANAGED_BY}={keys.MANAGER}"

    def dljobs(**options: Any) -> Any:
        where = (keys.GROUP, keys.VERSION, NAMESPACE, keys.PLURAL)
        return custom.list_namespaced_custom_object(*where, **options)

    def pods(**options: Any) -> Any:
        return core.list_namespaced_pod(NAMESPACE, label_selector=selector, **options)

    watches = [Watch(dljobs, progress.dljob), Watch(pods, progress.pod)]
    for watch in watches:
        watch.start()
    return watches


def submit_in_stages(
    args: argparse.Namespace, cluster: devcluster.LocalCluster, progress: Progress, pid: int
) -> list[Sample]:
    """Create the jobs stage by stage; the operator (`pid`) sampled before the first and after each."""
    started = time.monotonic()

    def sample() -> Sample:
        at = time.monotonic() - started
        return Sample(*progress.counts(), measure.rss_bytes(pid) / 2**20, measure.cpu_seconds(pid), at)

    samples, created = [sample()], 0
    for fraction in args.stages:
        target = round(fraction * args.jobs)
        print(f"stage: jobs {created}..{target - 1}", flush=True)
        jobs = [bench_job(f"j-{i}", i).obj() for i in range(created, target)]
        measure.create_in_parallel(cluster, NAMESPACE, jobs, writers=args.writers)
        created = target
        wait_stage(progress, target, settle=args.settle, timeout=args.stage_timeout, started=started)
        time.sleep(args.quiet)  # let the status writes and Events in flight land
        samples.append(sample())
        print(f"  sample: {samples[-1]}", flush=True)
    return samples


def run(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    cluster = devcluster.LocalCluster(
        state / "cluster",
        pools=(),
        timeout=args.start_timeout,
        progress=print,
        scheduler_qps=args.scheduler_qps or None,
    )
    operator, watches, profile = None, [], None
    try:
        prepare(cluster, args)
        progress = Progress()
        watches = watch_jobs(cluster, progress)
        operator = OperatorProcess(cluster, args.out / "operator.log", identity="bench-scale", settings={})
        operator.start()
        assert operator.process is not None
        time.sleep(5)  # the operator idle after its resync: the baseline sample
        served_before = measure.api_requests(cluster)
        if args.profile_operator:
            profile = measure.OperatorProfile(operator.process.pid, args.out / "operator.stacks.txt")
        samples = submit_in_stages(args, cluster, progress, operator.process.pid)
        served_after = measure.api_requests(cluster)
        if profile is not None:
            profile.stop()
            profile.print_top(f"placing {args.jobs} DLJobs")
        return figures(args, progress, samples, operator.log_text(), served_before, served_after)
    finally:
        for watch in watches:
            watch.stopping.set()
        if operator is not None:
            operator.stop()
        cluster.down()


def figures(
    args: argparse.Namespace,
    progress: Progress,
    samples: list[Sample],
    log_text: str,
    served_before: collections.Counter[str],
    served_after: collections.Counter[str],
) -> dict[str, Any]:
    latencies = progress.latencies_s()
    legs = {
        "dljob_to_pod_s": progress.latencies_s(until=progress.placed),
        "pod_to_bound_s": progress.latencies_s(since=progress.placed),
    }
    decided = decisions(log_text)
    per_job_ms = [ms for jobs, ms, _ in decided for _ in range(jobs)]
    cpu_ms = [cpu for _, _, cpu in decided if cpu is not None]
    # A cycle places a burst in one decision: its CPU per job placed, weighed per job
    cpu_per_job_ms = [cpu / jobs for jobs, _, cpu in decided if cpu is not None for _ in range(jobs)]
    last = samples[-1]
    intercept, slope = linear_fit([s.submitted for s in samples], [s.rss_mib * 2**20 for s in samples])
    grown = served_after - served_before
    job_requests = sum(n for kind, n in grown.items() if kind.split()[-1] not in BACKGROUND)
    bound = max(last.bound, 1)
    with progress.lock:
        waiting = collections.Counter(
            phase or "(none yet)" for job, phase in progress.phase.items() if job not in progress.bound
        )
    return {
        "nodes": args.nodes,
        "gpus": args.nodes * args.gpus_per_node,
        "kube_scheduler_qps": args.scheduler_qps or None,  # None: kube-scheduler's default
        "jobs_submitted": last.submitted,
        "jobs_placed": last.placed,
        "jobs_bound": last.bound,
        "jobs_not_bound_by_phase": dict(waiting),
        "placement_decision_ms": {
            "decisions": len(decided),
            "per_job_p50": round(percentile(per_job_ms, 50), 1),
            "per_job_p99": round(percentile(per_job_ms, 99), 1),
            "per_decision_p50": round(percentile([ms for _, ms, _ in decided], 50), 1),
            "per_decision_p99": round(percentile([ms for _, ms, _ in decided], 99), 1),
            "per_decision_cpu_p50": round(percentile(cpu_ms, 50), 2),
            "per_decision_cpu_p99": round(percentile(cpu_ms, 99), 2),
            "cpu_per_job_placed_p50": round(percentile(cpu_per_job_ms, 50), 3),
            "cpu_per_job_placed_p99": round(percentile(cpu_per_job_ms, 99), 3),
            "jobs_per_decision_mean": round(sum(j for j, _, _ in decided) / max(len(decided), 1), 1),
        },
        "dljob_to_bound_s": {
            "p50": round(percentile(latencies, 50), 2),
            "p99": round(percentile(latencies, 99), 2),
            "max": round(max(latencies, default=float("nan")), 2),
        },
        **{
            leg: {"p50": round(percentile(values, 50), 2), "p99": round(percentile(values, 99), 2)}
            for leg, values in legs.items()
        },
        "operator_rss_mib": round(last.rss_mib, 1),
        "operator_cpu_s": round(last.cpu_s - samples[0].cpu_s, 1),
        "operator_cpu_ms_per_bound_job": round(1000 * (last.cpu_s - samples[0].cpu_s) / bound, 2),
        "memory_bytes_per_job": round(slope),
        "memory_fit_intercept_mib": round(intercept / 2**20, 1),
        "memory_increments_bytes_per_job": [
            round((b.rss_mib - a.rss_mib) * 2**20 / (b.submitted - a.submitted))
            for a, b in itertools.pairwise(samples)
            if b.submitted > a.submitted
        ],
        "samples": [asdict(sample) for sample in samples],
        "api_requests_per_bound_job": round(job_requests / bound, 2),
        "api_requests_per_bound_job_by_kind": measure.per_object(served_before, served_after, bound),
        "background_requests": {kind: n for kind, n in grown.most_common() if kind.split()[-1] in BACKGROUND},
        "elapsed_s": round(last.at_s, 1),
    }


def table(result: dict[str, Any]) -> str:
    placement, bound = result["placement_decision_ms"], result["dljob_to_bound_s"]
    rows = [
        ("cluster", f"{result['nodes']} nodes, {result['gpus']} GPUs"),
        ("kube-scheduler client QPS", str(result["kube_scheduler_qps"] or "its default (50)")),
        (
            "jobs submitted / placed / bound",
            f"{result['jobs_submitted']} / {result['jobs_placed']} / {result['jobs_bound']}",
        ),
        ("not bound, by DLJob phase", str(result["jobs_not_bound_by_phase"] or "none")),
        (
            "placement decision p50 / p99 (per job)",
            f"{placement['per_job_p50']} / {placement['per_job_p99']} ms",
        ),
        (
            "placement decision p50 / p99 (per decision)",
            f"{placement['per_decision_p50']} / {placement['per_decision_p99']} ms, "
            f"{placement['decisions']} decisions, {placement['jobs_per_decision_mean']} jobs each",
        ),
        (
            "  its own CPU p50 / p99 (per decision)",
            f"{placement['per_decision_cpu_p50']} / {placement['per_decision_cpu_p99']} ms",
        ),
        (
            "  its own CPU per job placed p50 / p99",
            f"{placement['cpu_per_job_placed_p50']} / {placement['cpu_per_job_placed_p99']} ms",
        ),
        ("DLJob -> bound p50 / p99 / max", f"{bound['p50']} / {bound['p99']} / {bound['max']} s"),
        *(
            (f"  {label} p50 / p99", f"{result[leg]['p50']} / {result[leg]['p99']} s")
            for label, leg in (("DLJob -> pod", "dljob_to_pod_s"), ("pod -> bound", "pod_to_bound_s"))
        ),
        ("operator RSS at the end", f"{result['operator_rss_mib']} MiB"),
        (
            "operator CPU during the run",
            f"{result['operator_cpu_s']} s ({result['operator_cpu_ms_per_bound_job']} ms per bound job)",
        ),
        (
            "memory per job (fit; per stage)",
            f"{result['memory_bytes_per_job']} B; {result['memory_increments_bytes_per_job']}",
        ),
        ("API requests per bound job", f"{result['api_requests_per_bound_job']} (leases, nodes apart)"),
        ("  by kind", str(result["api_requests_per_bound_job_by_kind"])),
        ("  background", str(result["background_requests"])),
        ("elapsed from the first job", f"{result['elapsed_s']} s"),
    ]
    width = max(len(name) for name, _ in rows)
    samples = "\n".join(
        f"  {s['submitted']:>6} submitted {s['placed']:>6} placed {s['bound']:>6} bound "
        f"{s['rss_mib']:8.1f} MiB {s['cpu_s']:8.1f} CPU s at {s['at_s']:6.0f} s"
        for s in result["samples"]
    )
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows) + "\nsamples:\n" + samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--stages", default="0.1,0.25,0.5,1", help="fractions of --jobs, sampled after each")
    parser.add_argument("--writers", type=int, default=4, help="parallel kubectl processes creating DLJobs")
    parser.add_argument("--settle", type=float, default=60.0, help="s without a new binding: stage over")
    parser.add_argument("--quiet", type=float, default=5.0, help="s to wait before sampling the operator")
    parser.add_argument("--stage-timeout", type=float, default=1800.0)
    parser.add_argument("--start-timeout", type=float, default=900.0, help="s for the nodes to be Ready")
    parser.add_argument(
        "--scheduler-qps",
        type=int,
        default=200,
        help="kube-scheduler's client rate to the API server, as managed clouds set it for 1,000 nodes "
        "(it caps the pods bound a second); 0: kube-scheduler's own default, 50",
    )
    parser.add_argument("--out", type=Path, default=REPO / "out" / "scale")
    parser.add_argument("--profile-operator", action="store_true", help="py-spy the operator (dev extra)")
    args = parser.parse_args()
    args.stages = sorted(float(f) for f in args.stages.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "operator.log").unlink(missing_ok=True)
    # SIGTERM (a killed CI job, `timeout`) cleans up like Ctrl-C: the cluster is stopped either way.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="horus-scale-") as state:
        result = run(args, Path(state))
    (args.out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"written: {args.out / 'scale.json'}")


if __name__ == "__main__":
    main()
