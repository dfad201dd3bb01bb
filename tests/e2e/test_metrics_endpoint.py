"""The operator's /metrics on the real local control plane (issue 30, item 2): `horus run` serves it on
--metrics-port, and after placing jobs a scrape finds the counts the placements imply — two pods
placed on one shared GPU, a job left waiting because no GPU fits it, an invalid and an unsatisfiable
DLJob refused — and the leader's gauges and the decision histograms.

The cluster is the session's, shared with other modules; counters are compared before and after, and
the work runs on a GPU node of its own with the others cordoned."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from dljob_harness import apply, free_port, only_nodes, predicted_pairs, wait_phases
from prometheus_client.parser import text_string_to_metric_families

from horus_operator import devcluster
from horus_operator.testing.builders import DLJobBuilder
from horus_operator.testing.operator_process import REPO, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture(scope="module")
def operator(
    cluster: devcluster.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    cluster.wait_established("dljobs.horus.dev")
    log = tmp_path_factory.mktemp("metrics") / "operator.log"
    process = OperatorProcess(cluster, log, identity="e2e-metrics", metrics_port=free_port())
    process.start()
    yield process
    process.stop()


def test_a_scrape_after_placing_jobs_finds_the_counts_it_expects(
    cluster: devcluster.LocalCluster, operator: OperatorProcess, namespace: str
) -> None:
    port = operator.metrics_port

    def cycling() -> Samples | None:
        samples = _scrape(port)
        cycled = _value(samples, "horus_cycle_duration_seconds_count") > 0  # its first cycle after the resync
        return samples if _value(samples, "horus_leader") == 1 and cycled else None

    before = wait_for(cycling, timeout=30, what="the leader's /metrics after its first cycle")

    node = cluster.add_nodes(devcluster.GpuNodePool(count=1, gpus_per_node=1, name_prefix="metrics-node"))[0]
    compatible, _ = predicted_pairs()
    try:
        with only_nodes(cluster, [node]):
            first, second = (
                DLJobBuilder(f"fit-{i}").model(architecture=m).batch_size(b).obj()
                for i, (m, b) in enumerate(compatible)
            )
            apply(cluster, namespace, first)
            wait_phases(cluster, namespace, ["fit-0"], {"Scheduled", "Running"}, timeout=60)
            apply(cluster, namespace, second)
            jobs = wait_phases(cluster, namespace, ["fit-1"], {"Scheduled", "Running"}, timeout=60)
            assert jobs["fit-1"]["status"]["colocatedWith"] == [f"{namespace}/fit-0"]
            apply(
                cluster,
                namespace,
                DLJobBuilder("alone").spec(maxSlowdown=1.0).obj(),  # joins nobody: waits for an empty GPU
                DLJobBuilder("unknown-model").model(architecture="nosuchnet").obj(),
                DLJobBuilder("too-much-memory").model(architecture="vgg16").batch_size(65536).obj(),
            )
            wait_phases(cluster, namespace, ["unknown-model", "too-much-memory"], {"Failed"}, timeout=90)
            wait_phases(cluster, namespace, ["alone"], {"Queued"}, timeout=60)

            def refreshed() -> Samples | None:
                samples = _scrape(port)
                waiting = _value(samples, "horus_dljobs_pending", reason="no_fit")
                # The phases are the cache's, which sees a status write a moment after the decision
                # that wrote it: a refresh between the two shows "alone" not yet Queued.
                queued = _value(samples, "horus_dljobs", phase="Queued")
                shared = _value(samples, "horus_gpus_shared")
                return samples if waiting >= 1 and shared >= 1 and queued >= 1 else None

            after = wait_for(
                refreshed, timeout=30, what="the gauges to show the waiting job and the shared GPU"
            )
    finally:
        cluster.kubectl("delete", "dljobs", "--all", "-n", namespace, "--wait=true", check=False)
        cluster.kubectl("delete", "node", node, check=False)

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("horus_placements_total", binding="env") == 2
    assert delta("horus_refusals_total", reason="invalid_spec") == 1
    assert delta("horus_refusals_total", reason="unsatisfiable") == 1
    assert delta("horus_decision_duration_seconds_count") >= 2  # one decision per placing cycle at least
    assert delta("horus_cycle_duration_seconds_count") > 0
    assert _value(after, "horus_dljobs", phase="Failed") >= 2
    assert _value(after, "horus_dljobs", phase="Queued") >= 1
    assert _value(after, "horus_gpus_in_use") >= 1
    assert _value(after, "horus_gpus") >= _value(after, "horus_gpus_in_use")
    assert _value(after, "horus_leader") == 1
    assert _value(after, "horus_api_errors_total", code="unavailable") == 0
