"""The Grafana dashboard (manifests/dashboards/horus.json): every query parses as PromQL with a real
PromQL grammar (promql-parser: a port of Prometheus' own parser), and every metric a query names is one
the operator (`operator/metrics.py`) or the node agent (`agent/metrics.py`) exports, sample names
included (a counter's `_total`, a histogram's `_bucket` and `_count`). The ConfigMap that ships it
carries the Grafana sidecar's label, and the chart's copy is the same file."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry

from horus_operator.agent.metrics import AgentMetrics
from horus_operator.agent.summary import GpuSummary, NodeSummary, PodUsage
from horus_operator.operator.apierrors import ApiUnavailable
from horus_operator.operator.metrics import OperatorMetrics, gauges

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "manifests" / "dashboards"
DASHBOARD = json.loads((DASHBOARDS / "horus.json").read_text())
# Grafana's variables, as Grafana replaces them before the query reaches Prometheus.
VARIABLES = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "6h", "$node": ".*"}


def _sample_names(registry: CollectorRegistry) -> set[str]:
    return {sample.name for family in registry.collect() for sample in family.samples}


def _exported() -> set[str]:
    """The names of the samples the operator and the agent expose, each metric exercised once (a
    labelled metric exposes nothing before its first use; the log-ratio histogram has no `_sum`)."""
    operator = OperatorMetrics(refresh_every=0)
    operator.cycled(0.1)
    operator.decided(0.01)
    operator.placed("env")
    operator.refused("unsatisfiable")
    operator.moved("repack")
    operator.api_error(ApiUnavailable("MaxRetryError"))
    operator.retried("cycle")
    operator.sample("Tesla-V100", predicted=1.2, observed=1.3, refused=None)
    operator.leading(True)
    operator.refresh(lambda: gauges(["queued"], ["Queued"], [], gpus=4))
    agent = AgentMetrics()
    agent.publishes.labels(result="ok").inc()
    agent.nvml_errors.inc()
    pod = PodUsage("team-a", "job-0", "uid", "job", 0.5, 1000.0, None)
    gpu = GpuSummary(0, "GPU-0", "Tesla-V100", 16384, 1000.0, 0.5, 0.1, True, (pod,))
    agent.summary.latest = NodeSummary("n0", "fake", 0.0, 10.0, True, "", (gpu,))
    exported = _sample_names(operator.registry) | _sample_names(agent.registry)
    unused = {f.name for r in (operator.registry, agent.registry) for f in r.collect() if not f.samples}
    assert not unused, f"exercise these too: {unused}"
    return exported


EXPORTED = _exported()


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def _queries() -> list[tuple[str, str]]:
    """(where, query) of every panel target and every query variable."""
    found = [
        (f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in _panels(DASHBOARD["panels"])
        for target in panel.get("targets", [])
    ]
    for variable in DASHBOARD["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(<series selector>, <label>): Grafana's; its first argument is PromQL.
            query = variable["query"]["query"]
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
            assert match, query
            found.append((f"variable {variable['name']}", match.group(1)))
    return found


def _substituted(query: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda item: -len(item[0])):
        query = query.replace(name, value)
    assert "$" not in query, f"a Grafana variable this test does not know: {query}"
    return query


def _metric_names(query: str) -> set[str]:
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next(
                (
                    m.value
                    for m in node.matchers.matchers
                    if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal
                ),
                None,
            )
            assert name, f"a selector without a metric name: {query}"
            names.add(name)

    promql_parser.walk(promql_parser.parse(query), visit)
    return names


QUERIES = _queries()


def test_the_dashboard_has_queries() -> None:
    assert len(QUERIES) >= 15


@pytest.mark.parametrize(("where", "query"), QUERIES, ids=[where for where, _ in QUERIES])
def test_every_query_parses_and_names_only_exported_metrics(where: str, query: str) -> None:
    names = _metric_names(_substituted(query))
    assert names, f"{where}: names no metric"
    assert names <= EXPORTED, f"{where}: not exported by the operator or the agent: {names - EXPORTED}"


def test_the_parser_is_a_real_one() -> None:
    """What a regex would let through, the parser refuses; what it would miss, it finds."""
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(horus_moves_total[5m])")
    with pytest.raises(ValueError):
        promql_parser.parse("rate(horus_moves_total)")  # rate() of an instant vector
    assert _metric_names('{__name__="horus_leader"} + on() horus_gpus') == {"horus_leader", "horus_gpus"}


def test_the_dashboard_shows_what_issue_30_asks() -> None:
    """The queue, decisions, shared GPUs, predicted vs observed slowdown, per-node GPU use."""
    named = set().union(*(_metric_names(_substituted(q)) for _, q in QUERIES))
    assert {
        "horus_dljobs_pending",
        "horus_decision_duration_seconds_bucket",
        "horus_gpus_shared",
        "horus_slowdown_log_ratio_bucket",
        "horus_gpu_utilization_ratio",
    } <= named


def test_panels_are_well_formed() -> None:
    panels = list(_panels(DASHBOARD["panels"]))
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(set(refs)) == len(refs), panel["title"]
    assert DASHBOARD["uid"] == "horus"


def test_the_configmap_carries_the_grafana_sidecars_label() -> None:
    kustomization = yaml.safe_load((DASHBOARDS / "kustomization.yaml").read_text())
    assert kustomization["generatorOptions"]["labels"]["grafana_dashboard"] == "1"
    (generated,) = kustomization["configMapGenerator"]
    assert generated["files"] == ["horus.json"]


def test_the_charts_copy_is_the_same_dashboard() -> None:
    chart_copy = REPO / "charts" / "horus" / "dashboards" / "horus.json"
    assert chart_copy.read_bytes() == (DASHBOARDS / "horus.json").read_bytes(), (
        "cp manifests/dashboards/horus.json charts/horus/dashboards/horus.json"
    )
    chart_values = yaml.safe_load((REPO / "charts" / "horus" / "values.yaml").read_text())
    assert chart_values["metrics"]["grafanaDashboard"]["labels"] == {"grafana_dashboard": "1"}


def test_the_alerts_docs_suggest_parse_and_name_exported_metrics() -> None:
    text = (REPO / "docs" / "operator.md").read_text()
    block = text.split("Alerts a platform team would set", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    rules = [rule for group in yaml.safe_load(block)["groups"] for rule in group["rules"]]
    assert len(rules) >= 2
    for rule in rules:
        names = _metric_names(rule["expr"])
        assert names and names <= EXPORTED, (rule["alert"], names - EXPORTED)
