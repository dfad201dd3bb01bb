"""The one DLJob builder, in the style of Kueue's `MakeWorkload(...).Queue(...).Obj()`:

    DLJobBuilder("train-a").model(architecture="vgg16").batch_size(64).runs_for("3s").obj()

is the manifest a user applies (kubectl, e2e tests, benchmarks);
`DLJobBuilder.stored("train-a")` starts from the object as the API server returns it, with namespace,
uid, generation and creation time filled in (what the operator's watches see: unit tests).
"""

from __future__ import annotations

import copy
from typing import Any

from horus_operator.api import keys

IMAGE = "example.invalid/train:1"  # never pulled: kwok runs nothing


class DLJobBuilder:
    def __init__(self, name: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": keys.API_VERSION,
            "kind": keys.KIND,
            "metadata": {"name": name},
            "spec": {
                "model": {"architecture": "resnet50"},
                "batchSize": 32,
                "template": {"spec": {"containers": [{"name": "train", "image": IMAGE}]}},
            },
        }

    @classmethod
    def stored(cls, name: str, namespace: str = "team-a") -> DLJobBuilder:
        builder = cls(name)
        builder._body["metadata"].update(
            namespace=namespace,
            uid=f"uid-{name}",
            generation=1,
            creationTimestamp="2026-12-02T10:00:00Z",
        )
        return builder

    def model(self, **model: Any) -> DLJobBuilder:
        """`spec.model` replaced whole, e.g. `model(onnx={"configMap": "graph"})`."""
        self._body["spec"]["model"] = model
        return self

    def batch_size(self, batch_size: int) -> DLJobBuilder:
        return self.spec(batchSize=batch_size)

    def runs_for(self, duration: str) -> DLJobBuilder:
        """On kwok nodes, the pod succeeds this long after it starts (`spec.simulation.duration`)."""
        return self.spec(simulation={"duration": duration})

    def spec(self, **fields: Any) -> DLJobBuilder:
        self._body["spec"].update(fields)
        return self

    def status(self, **fields: Any) -> DLJobBuilder:
        self._body.setdefault("status", {}).update(fields)
        return self

    def generation(self, generation: int) -> DLJobBuilder:
        self._body["metadata"]["generation"] = generation
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


# Benchmarks' job mix: catalog models with their usual batch sizes, in turn.
BENCH_MODELS = (("resnet50", 32), ("resnet18", 128), ("lstm-lm", 20), ("transformer", 64), ("vgg16", 32))


def bench_job(name: str, index: int) -> DLJobBuilder:
    """The `index`-th job of the benchmarks' mix (`BENCH_MODELS` in turn)."""
    architecture, batch_size = BENCH_MODELS[index % len(BENCH_MODELS)]
    return DLJobBuilder(name).model(architecture=architecture).batch_size(batch_size)
