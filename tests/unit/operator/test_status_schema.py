"""Every status the loop writes fits the CRD's status schema (crds/dljob.yaml): a field of the wrong type
or outside an enum is a 422 on every write (the job's status then never changes), and an undeclared
field is pruned by the API server (the loop, finding it missing, writes it again forever). The API
server's own validation runs in the e2e suite; this catches both on the way in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_builders import PodBuilder

from horus_operator.api import dljob
from horus_operator.operator.jobs import oom, pods, reconcile
from horus_operator.operator.moves import preemption
from horus_operator.placement.preemption import Preemption
from horus_operator.placement.types import RunningJob
from horus_operator.testing.builders import DLJobBuilder

CRD = Path(__file__).resolve().parents[3] / "crds" / "dljob.yaml"
NOW = datetime(2026, 12, 2, 10, 10, tzinfo=UTC)
TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


def _status_schema() -> dict[str, Any]:
    version = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]["properties"]["status"]


def _problems(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Where `value` breaks `schema` (types, enums, undeclared fields of objects that prune)."""
    if value is None:
        return []  # a merge patch's "remove this field"
    kind = schema.get("type")
    if (kind and not isinstance(value, TYPES[kind])) or (
        kind in ("integer", "number") and isinstance(value, bool)
    ):
        return [f"{path}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} not in {schema['enum']}"]
    found: list[str] = []
    if isinstance(value, dict):
        declared = schema.get("properties") or {}
        for key, item in value.items():
            if key in declared:
                found += _problems(item, declared[key], f"{path}.{key}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                found.append(f"{path}.{key}: not declared (pruned)")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += _problems(item, schema["items"], f"{path}[{i}]")
    return found


def _statuses() -> dict[str, dict[str, Any]]:
    place = {"position": 1, "waiting": 2, "order": "shortest-remaining", "reason": "remaining work first"}
    job = DLJobBuilder.stored("cnn").spec(totalSteps=1000, migration={"allowed": True}).obj()
    predicted = {"utilization": 0.5, "memoryMiB": 4000.0, "slowdown": 1.2, "stepSeconds": 0.2}
    sources = {"slowdownSource": "observed", "slowdownSamples": 3, "utilizationSource": "observed"}
    running = PodBuilder("cnn").bound().phase("Running").predicted({**predicted, **sources})

    def decide(
        *builders: PodBuilder, current: dict[str, Any] | None = None, **context: Any
    ) -> dict[str, Any]:
        ctx = reconcile.Context(now=NOW, nodes=("gpu-node-0",), **context)
        views = [pods.view(b.obj()) for b in builders]
        return reconcile.decide(dljob.parse(job), current or job.get("status") or {}, views, ctx).status

    stopped = pods.view(running.obj())
    assert stopped.request is not None
    chosen = Preemption(
        "team-a/cnn", "gpu-node-0", (0,), RunningJob(stopped.request, "gpu-node-0", (0,)), "r"
    )
    preempted = preemption.recorded({}, chosen, stopped, NOW)
    out_of_memory = PodBuilder("cnn").bound().failed("torch.OutOfMemoryError: CUDA out of memory.")
    beside = PodBuilder("bert").bound().phase("Running")
    seen = {"observed": {"memoryMiB": 9000}}
    ending = oom.ending([pods.view(out_of_memory.obj())], seen, lambda: [pods.view(beside.obj())], {})

    return {
        "queued": decide(queue=place, waiting_message="waiting: no GPU free"),
        "running": decide(running),
        "succeeded": decide(PodBuilder("cnn").bound().phase("Succeeded")),
        "failed": decide(verdict=dljob.InvalidJob("spec.batchSize", 0, "at least 1")),
        "preempted": {**decide(running, current=preempted, preempts=True), **preempted},
        "out of memory": decide(out_of_memory, current=seen, oom=ending),
    }


@pytest.mark.parametrize("name", ["queued", "running", "succeeded", "failed", "preempted", "out of memory"])
def test_each_status_the_loop_writes_fits_the_crd(name: str) -> None:
    assert _problems(_statuses()[name], _status_schema(), "status") == []
