"""DLJob → bound pod throughput on the local control plane, against kube-scheduler binding plain pods.

In one fresh cluster of fake GPU nodes, the same number of objects go two ways:
1. plain pods (no GPU request, no node selector) created with kubectl, bound by kube-scheduler;
2. DLJobs created with kubectl; Horus (`horus run`, a subprocess) predicts, places and creates one pod per
   job with a node selector, which kube-scheduler then binds.
Each rate is objects / seconds from the start of `kubectl create` until every pod has `spec.nodeName`.
The ratio DLJob rate / plain rate is the figure of merit (target >= 0.5).

Usage: .venv/bin/python bench/e2e_throughput.py [--jobs 500] [--nodes 100] [--json out.json]
       [--profile-operator collapsed.txt]

`--profile-operator` samples the operator with py-spy (the dev extra installs it) while it places the
DLJobs, writes the collapsed stacks there and prints where its CPU went, by function.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import kubernetes

from horus_operator import devcluster
from horus_operator.testing import measure
from horus_operator.testing.builders import bench_job
from horus_operator.testing.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]


def plain_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "example.invalid/train:1"}],
        },
    }


def count_bound(core: kubernetes.client.CoreV1Api, namespace: str) -> int:
    raw = core.list_namespaced_pod(namespace, field_selector="spec.nodeName!=", _preload_content=False)
    return len(json.loads(raw.data)["items"])


def timed_create(
    cluster: devcluster.LocalCluster,
    core: kubernetes.client.CoreV1Api,
    namespace: str,
    items: list[dict[str, Any]],
    *,
    writers: int,
) -> float:
    """Seconds from the start of creating `items` (`writers` kubectl processes in parallel, each a slice,
    as a GitOps tool applies many objects) until that many pods in `namespace` are bound."""
    cluster.kubectl("create", "namespace", namespace)
    start = time.monotonic()
    measure.create_in_parallel(cluster, namespace, items, writers=writers)
    print(f"{namespace}: creating {len(items)} objects took {time.monotonic() - start:.1f} s", flush=True)
    while count_bound(core, namespace) < len(items):
        if time.monotonic() - start > 900:
            raise TimeoutError(f"{namespace}: only {count_bound(core, namespace)}/{len(items)} pods bound")
        time.sleep(0.1)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--writers", type=int, default=4, help="parallel kubectl processes creating objects")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--operator-log", type=Path, help="keep the operator's log here")
    parser.add_argument("--operator-nice", type=int, default=0, help="run the operator at this nice level")
    parser.add_argument("--profile-operator", type=Path, help="sample the operator while it places DLJobs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="horus-bench-") as state:
        pool = devcluster.GpuNodePool(count=args.nodes, gpus_per_node=args.gpus_per_node)
        cluster = devcluster.LocalCluster(Path(state) / "cluster", pools=(pool,))
        cluster.up()
        operator, profile = None, None
        try:
            cluster.kubectl("apply", "-k", str(REPO / "crds"))
            cluster.wait_established("dljobs.horus.dev")
            core = kubernetes.client.CoreV1Api(
                kubernetes.config.new_client_from_config(str(cluster.kubeconfig))
            )
            operator = OperatorProcess(
                cluster,
                args.operator_log or Path(state) / "operator.log",
                identity="bench",
                settings={},  # the operator's defaults, as deployed
                nice=args.operator_nice,
            )
            operator.start()
            pods = [plain_pod(f"p-{i}") for i in range(args.jobs)]
            served = measure.api_requests(cluster)
            plain_s = timed_create(cluster, core, "bench-plain", pods, writers=args.writers)
            served_plain = measure.api_requests(cluster)
            jobs = [bench_job(f"j-{i}", i).obj() for i in range(args.jobs)]
            assert operator.process is not None
            profile = (
                measure.OperatorProfile(operator.process.pid, args.profile_operator)
                if args.profile_operator
                else None
            )
            operator_cpu = measure.cpu_seconds(operator.process.pid)
            dljob_s = timed_create(cluster, core, "bench-dljob", jobs, writers=args.writers)
            operator_cpu = measure.cpu_seconds(operator.process.pid) - operator_cpu
            served_dljob = measure.api_requests(cluster)
            if profile is not None:
                profile.stop()
        finally:
            if operator is not None:
                operator.stop()
            cluster.down()

    plain_rate, dljob_rate = args.jobs / plain_s, args.jobs / dljob_s
    figures = {
        "jobs": args.jobs,
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "writers": args.writers,
        "operator_nice": args.operator_nice,
        "plain_pods_seconds": round(plain_s, 2),
        "plain_pods_per_second": round(plain_rate, 1),
        "dljobs_seconds": round(dljob_s, 2),
        "dljobs_per_second": round(dljob_rate, 1),
        "ratio": round(dljob_rate / plain_rate, 3),
        "operator_cpu_seconds": round(operator_cpu, 2),  # while the DLJobs were created and placed
        "requests_per_plain_pod": measure.per_object(served, served_plain, args.jobs),
        "requests_per_dljob": measure.per_object(served_plain, served_dljob, args.jobs),
    }
    print(f"plain pods bound by kube-scheduler: {args.jobs} in {plain_s:.1f} s = {plain_rate:.1f}/s")
    print(f"DLJobs placed by Horus and bound:   {args.jobs} in {dljob_s:.1f} s = {dljob_rate:.1f}/s")
    print(f"ratio (target >= 0.5): {figures['ratio']:.2f}")
    print(f"operator CPU while the DLJobs were created and placed: {operator_cpu:.1f} s")
    for name in ("requests_per_plain_pod", "requests_per_dljob"):
        print(f"API requests {name[len('requests_') :]} (all clients):", figures[name])
    if profile is not None:
        profile.print_top("placing DLJobs")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
