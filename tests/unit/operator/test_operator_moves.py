"""Moving a running DLJob in the scheduling loop, against `FakeKube`: the move is recorded before the pod
is deleted with its grace period, the new pod comes only once the old one is gone, on the chosen GPU, and
a restart at any step finishes the move. Jobs that do not allow moving stay."""

from __future__ import annotations

import asyncio
from typing import Any

from operator_builders import FakeKube, PodBuilder, gpu_node
from test_operator_loop import NOW, _catalog, _settle

from horus_operator.operator.cache import ClusterCache, job_key
from horus_operator.operator.jobs import jobspec
from horus_operator.operator.loop import LoopConfig, SchedulingLoop
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.moves import MoveSettings
from horus_operator.placement.registry import make_policy
from horus_operator.testing.builders import DLJobBuilder

# Two resnet50 jobs on one GPU: predicted 1.5x each (within maxSlowdown 2.0), observed 2.6x for an hour.
PREDICTOR = TablePredictor(jobs={"resnet50": (0.5, 4000.0)}, pairs={("resnet50", "resnet50"): (1.5, 1.5)})
OBSERVED = {"slowdown": 2.6, "stateSince": "2026-12-02T09:00:00Z", "sharingWith": []}


def _loop(kube: FakeKube) -> SchedulingLoop:
    return SchedulingLoop(
        kube=kube,  # type: ignore[arg-type]
        cache=ClusterCache(),
        policy=make_policy("horus", predictor=PREDICTOR),
        resolver=jobspec.WorkloadResolver(_catalog, read_onnx=lambda *_: b"", onnx_features=lambda d, b: {}),
        config=LoopConfig(moves=MoveSettings(over_limit_for_s=300.0)),
        clock=lambda: NOW,
    )


def _paired(allowed: bool = True) -> FakeKube:
    """a and b share gpu-node-0's GPU 0, both observed 2.6x; a allows moving (when `allowed`), b not."""
    kube = FakeKube()
    kube.nodes["gpu-node-0"] = gpu_node("gpu-node-0", count=2)
    for name, migratable in (("a", allowed), ("b", False)):
        job = DLJobBuilder.stored(name).spec(migration={"allowed": migratable, "gracePeriodSeconds": 45})
        body = job.status(observed=OBSERVED).obj()
        kube.jobs[job_key(body)] = body
        pod = PodBuilder(name).on("gpu-node-0", 0).bound().phase("Running").obj()
        kube.pods[job_key(pod)] = pod
    return kube


def _status(kube: FakeKube, name: str) -> dict[str, Any]:
    return kube.jobs[f"team-a/{name}"]["status"]


def test_a_job_over_its_limit_is_moved_once_its_old_pod_is_gone() -> None:
    kube = _paired()
    loop = _loop(kube)
    asyncio.run(_settle(loop))

    (move,) = _status(kube, "a")["moves"]
    assert {k: move[k] for k in ("from", "to", "trigger", "attempt", "state")} == {
        "from": "gpu-node-0/0",
        "to": "gpu-node-0/1",
        "trigger": "over-limit",
        "attempt": 0,
        "state": "Moving",
    }
    assert "observed slowdown 2.60x above maxSlowdown 2.00" in move["reason"]
    assert kube.graceful == [("a-0", 45)]
    assert sorted(kube.pods) == ["team-a/a-0", "team-a/b-0"], "no second pod while the first stops"
    assert _status(kube, "a")["phase"] == "Queued"

    kube.stop_deleting()
    asyncio.run(_settle(loop))
    new = kube.pods["team-a/a-1"]
    assert new["metadata"]["annotations"]["horus.dev/gpus"] == "1"
    (move,) = _status(kube, "a")["moves"]
    assert (move["state"], move["to"]) == ("Moved", "gpu-node-0/1")
    assert [reason for name, reason, _ in kube.events if name == "a"] == ["Moving", "Moved"]
    assert "moves" not in _status(kube, "b"), "b does not allow moving"


def test_jobs_that_do_not_allow_moving_stay_however_slow() -> None:
    kube = _paired(allowed=False)
    asyncio.run(_settle(_loop(kube)))
    assert kube.graceful == [] and len(kube.pods) == 2
    assert "moves" not in _status(kube, "a")


def test_a_restarted_operator_finishes_a_move_it_recorded_but_had_not_begun() -> None:
    # The operator wrote the move and died before deleting the pod: the next one deletes it, waits for
    # it to stop, and starts the job on the recorded target.
    kube = _paired()
    recorded = {"from": "gpu-node-0/0", "to": "gpu-node-0/1", "reason": "r", "trigger": "over-limit"}
    moving = {**recorded, "at": "2026-12-02T09:59:00Z", "attempt": 0, "state": "Moving"}
    kube.jobs["team-a/a"]["status"]["moves"] = [moving]
    loop = _loop(kube)
    asyncio.run(_settle(loop, cycles=1))
    assert kube.graceful == [("a-0", 45)]
    kube.stop_deleting()
    asyncio.run(_settle(_loop(kube)))  # and another restart while it was stopping

    assert sorted(kube.pods) == ["team-a/a-1", "team-a/b-0"]
    assert kube.pods["team-a/a-1"]["metadata"]["annotations"]["horus.dev/gpus"] == "1"
    assert [m["state"] for m in _status(kube, "a")["moves"]] == ["Moved"]
