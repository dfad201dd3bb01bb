"""The online correction's ConfigMap, with our own API adapter (`Kube`) replaced by ConfigMaps in a dict
that answer as the API server does (create of an existing name: 409; replace of a missing one: 404)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.apierrors import Conflict, NotFound
from horus_operator.operator.telemetry import learning
from horus_operator.operator.telemetry.learning import CorrectionStore, Learning
from horus_operator.placement.fake import TablePredictor
from horus_operator.prediction.api import Workload
from horus_operator.prediction.correction import CorrectedPredictor, Observation


class ConfigMaps:
    def __init__(self) -> None:
        self.maps: dict[str, dict[str, Any]] = {}

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def list_config_maps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        label, value = selector.split("=")
        return [m for m in self.maps.values() if m["metadata"]["labels"].get(label) == value]

    def put_config_map(self, namespace: str, body: dict[str, Any], *, exists: bool) -> None:
        name = body["metadata"]["name"]
        if exists and name not in self.maps:
            raise NotFound(404, "not found")
        if not exists and name in self.maps:
            raise Conflict(409, "exists")
        self.maps[name] = json.loads(json.dumps(body))


def _learning(maps: ConfigMaps, prior_id: str = "m1") -> Learning:
    prior = TablePredictor({}, {("a", "b"): (1.2, 1.2)})
    store = CorrectionStore(maps, "horus-system")  # type: ignore[arg-type]
    return Learning(CorrectedPredictor(prior), maps, store, prior_id=prior_id)  # type: ignore[arg-type]


def _observation(sample: str, slowdown: float = 2.0) -> Observation:
    return Observation(sample, "v100", Workload("a", 32), (Workload("b", 32),), slowdown, 10.0, 5.0)


def test_lessons_are_saved_in_one_configmap_whichever_replica_created_it() -> None:
    maps = ConfigMaps()
    first, second = _learning(maps), _learning(maps)

    asyncio.run(first.learn([_observation("1")]))
    asyncio.run(second.learn([_observation("2")]))  # it never loaded: it creates, gets 409, replaces

    (stored,) = maps.maps.values()
    assert stored["metadata"]["name"] == learning.NAME
    assert json.loads(stored["data"][learning.STATE_KEY])["seen"] == ["2"]


def test_an_unreadable_saved_state_is_ignored_and_overwritten() -> None:
    maps = ConfigMaps()
    maps.maps[learning.NAME] = {
        "metadata": {"name": learning.NAME, "labels": {keys.LABEL_DATASET: learning.DATASET}},
        "data": {learning.STATE_KEY: "{not json"},
    }
    replica = _learning(maps)

    asyncio.run(replica.restore())
    learned = asyncio.run(replica.learn([_observation("1"), _observation("1"), _observation("x", 99.0)]))

    assert learned == 1  # the repeat and the absurd slowdown are refused
    assert json.loads(maps.maps[learning.NAME]["data"][learning.STATE_KEY])["seen"] == ["1"]


def test_jobs_profiled_alone_teach_their_runtimes_floor_which_is_saved_and_restored() -> None:
    maps = ConfigMaps()
    leader = _learning(maps)
    leader.predictor.prior = TablePredictor({m: (0.5, 1000.0) for m in "abc"}, {})  # states no least memory
    for model, reading in (("a", 2100.0), ("b", 1900.0), ("c", 2300.0)):  # hand-made readings alone
        asyncio.run(leader.profile("rtx-3090", Workload(model, 1), 0.4, reading))

    follower = _learning(maps)
    asyncio.run(follower.restore())

    assert follower.predictor.correction.process_floor("rtx-3090", "pytorch") == 1900.0
    assert follower.predictor.correction.process_floor("rtx-3090", "tensorflow") is None
