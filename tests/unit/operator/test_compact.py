"""What the cache keeps of an API object (`compact.kept`): everything but managedFields, equal to what
was sent, strings shared across copies, the sender's object untouched; and a pod's view shares the
strings many pods have."""

from __future__ import annotations

import copy
import json
from typing import Any

from operator_builders import PodBuilder

from horus_operator.operator import compact
from horus_operator.operator.cache import ClusterCache
from horus_operator.operator.jobs import pods
from horus_operator.testing.builders import DLJobBuilder

MANAGED = [
    {
        "manager": "kubectl-create",
        "operation": "Update",
        "apiVersion": "horus.dev/v1alpha1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {".": {}, "f:batchSize": {}, "f:model": {".": {}, "f:architecture": {}}}},
    }
]


def sent(name: str) -> dict[str, Any]:
    """A DLJob as a watch delivers it: decoded from JSON, with managedFields and a status."""
    body = DLJobBuilder.stored(name).status(phase="Running", message=f"pod {name}-0 running").obj()
    body["metadata"]["managedFields"] = MANAGED
    return json.loads(json.dumps(body))


def test_kept_drops_managed_fields_only() -> None:
    body = sent("a")
    kept = compact.kept(body)
    expected = copy.deepcopy(body)
    del expected["metadata"]["managedFields"]
    assert kept == expected


def test_the_body_sent_is_left_as_it_was() -> None:
    body = sent("a")
    before = copy.deepcopy(body)
    compact.kept(body)
    assert body == before


def test_two_jobs_share_their_keys_and_repeated_values() -> None:
    a, b = compact.kept(sent("a")), compact.kept(sent("b"))
    key_a = next(k for k in a["status"] if k == "phase")
    key_b = next(k for k in b["status"] if k == "phase")
    assert key_a is key_b
    assert a["status"]["phase"] is b["status"]["phase"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]


def test_the_cache_keeps_jobs_and_nodes_without_managed_fields() -> None:
    cache = ClusterCache()
    cache.put_job(sent("a"))
    node = {"metadata": {"name": "n", "managedFields": MANAGED}, "status": {}}
    cache.put_node(node)
    assert "managedFields" not in cache.jobs["team-a/a"]["metadata"]
    assert "managedFields" not in cache.nodes["n"]["metadata"]
    cache.replace_all(jobs=[sent("b")], pods=[], nodes=[node])
    assert "managedFields" not in cache.jobs["team-a/b"]["metadata"]
    assert "managedFields" not in cache.nodes["n"]["metadata"]


def test_pod_views_share_what_many_pods_have() -> None:
    a, b = (pods.view(json.loads(json.dumps(PodBuilder(job).on("gpu-node-3").bound().obj()))) for job in "ab")
    assert a.namespace is b.namespace and a.node is b.node and a.bound_node is b.bound_node
    assert a.phase is b.phase
    assert a.request is not None and b.request is not None
    assert a.request.workload.model is b.request.workload.model
    assert next(iter(a.predicted)) is next(iter(b.predicted))
