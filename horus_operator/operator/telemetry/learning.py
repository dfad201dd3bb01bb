"""Online correction in the operator: observed co-locations correct the slowdowns the loop places with.

The leader feeds each job's observed slowdown next to one co-tenant (from `updates.py`) into the
`CorrectedPredictor` the scheduling loop and its policy decide with; the next placement reads the lesson.
The state lives in the cluster, in ConfigMap `horus-slowdown-correction` (label
horus.dev/dataset=correction, key `correction.json`) in the operator's namespace: saved after every
lesson, loaded whenever this replica gains the lease (`restore`, from the loop's resync), so it survives
restarts and leader changes. A state saved for other models, or unreadable, is ignored (logged): the
operator then starts again from the prior. See docs/operator.md, "Online correction".
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.apierrors import ApiError, ApiUnavailable, Conflict, NotFound
from horus_operator.operator.kube import Kube
from horus_operator.operator.metrics import OperatorMetrics
from horus_operator.prediction.api import Predictor, Workload
from horus_operator.prediction.correction import CorrectedPredictor, Observation

log = logging.getLogger(__name__)

DATASET = "correction"
NAME = "horus-slowdown-correction"
STATE_KEY = "correction.json"


class CorrectionStore:
    """The saved state in its ConfigMap. Blocking `Kube` calls: run them in its pool."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self._kube, self._namespace = kube, namespace

    def load(self) -> Mapping[str, Any] | None:
        """The saved state, or None when there is none. `ValueError` when it is not JSON."""
        maps = self._kube.list_config_maps(self._namespace, f"{keys.LABEL_DATASET}={DATASET}")
        found = next((m for m in maps if m["metadata"]["name"] == NAME), None)
        if found is None:
            return None
        state = json.loads((found.get("data") or {}).get(STATE_KEY) or "{}")
        if not isinstance(state, dict):
            raise ValueError(f"{STATE_KEY}: expected a JSON object")
        return state

    def save(self, state: Mapping[str, Any], *, exists: bool) -> None:
        body = {
            "metadata": {"name": NAME, "labels": {keys.LABEL_DATASET: DATASET}},
            "data": {STATE_KEY: json.dumps(state, separators=(",", ":"))},
        }
        self._kube.put_config_map(self._namespace, body, exists=exists)


@dataclass
class Learning:
    predictor: CorrectedPredictor  # what it teaches: the loop and its policy decide with it
    kube: Kube
    store: CorrectionStore
    prior_id: str  # the models the correction is relative to (`artifacts.identity`)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    # What placement reads, where it is not `predictor` itself (time-sliced co-tenants, `--sharing
    # timeslicing`): the predicted side of the predicted-vs-observed metric.
    placement_reads: Predictor | None = None
    _saved: bool = False  # whether the ConfigMap exists (replace, not create)
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def restore(self) -> None:
        """Load the saved state (on gaining the lease: another replica may have learned meanwhile)."""
        try:
            state = await self.kube.call(self.store.load)
        except (ApiError, ApiUnavailable) as error:
            log.warning("online correction not loaded, deciding from what this replica knows: %s", error)
            return
        except ValueError as error:
            log.warning(
                "online correction in ConfigMap %s unreadable, starting from the prior: %s", NAME, error
            )
            state = None
        self._saved = state is not None
        if state is None:
            return
        try:
            loaded = self.predictor.correction.load(state, self.prior_id)
        except ValueError as error:
            log.warning(
                "online correction in ConfigMap %s malformed, starting from the prior: %s", NAME, error
            )
            return
        if loaded:
            log.info("online correction restored: %d entries", len(self.predictor.correction))
        else:
            log.info("online correction in ConfigMap %s is for other models: starting from the prior", NAME)

    async def learn(self, observations: Sequence[Observation]) -> int:
        """Learn from each observation; save once when any was learned. Returns how many were."""
        learned = 0
        for observation in observations:
            predicted = self._predicted(observation)
            refused = self.predictor.learn(observation)
            if refused != "already learned":
                self.metrics.sample(
                    observation.gpu, predicted=predicted, observed=observation.slowdown, refused=refused
                )
            if refused is None:
                learned += 1
                log.info(
                    "online correction: %s/%s next to %s on %s observed %.2fx",
                    observation.workload.model,
                    observation.workload.batch_size,
                    ",".join(f"{w.model}/{w.batch_size}" for w in observation.cotenants),
                    observation.gpu,
                    observation.slowdown,
                )
            elif refused != "already learned":
                log.debug("online correction refused sample %s: %s", observation.sample_id, refused)
        if learned:
            await self._save()
        return learned

    def _predicted(self, observation: Observation) -> float | None:
        """The slowdown placement reads for the observed job next to its co-tenants, before this lesson
        (None: the prior says they cannot share, or the sample was learned already)."""
        if self.predictor.correction.seen(observation.sample_id):
            return None
        together = [observation.workload, *observation.cotenants]
        reads = self.placement_reads or self.predictor
        predicted = reads.slowdowns(observation.gpu, together, observation.memory_mib)
        return predicted[0] if predicted else None

    async def profile(
        self, gpu: str, workload: Workload, busy: float, memory_mib: float | None = None
    ) -> None:
        """A job of `workload`'s signature ran alone on `gpu` this busy (0..1), holding `memory_mib` of
        GPU memory: kept, and saved, for the slowdown prior and placement of its kind (issue 25,
        item 2); the largest memory seen wins over the predicted one (issue 26, item 3), and the memory
        bounds its runtime's process floor on that GPU type (issue 45, item 3)."""
        self.predictor.correction.note_utilization(gpu, workload, busy)
        if memory_mib is not None:
            self.predictor.note_memory_alone(gpu, workload, memory_mib)
        log.info(
            "online correction: %s/%s alone on %s %.0f%% busy",
            workload.model,
            workload.batch_size,
            gpu,
            100 * busy,
        )
        await self._save()

    async def _save(self) -> None:
        """One save at a time, each of the state as it is when its turn comes (so the last one wins)."""
        async with self._saving:
            state = self.predictor.correction.to_dict(self.prior_id)
            for exists in (self._saved, not self._saved):
                try:
                    await self.kube.call(self.store.save, state, exists=exists)
                except (Conflict, NotFound):  # created by a former leader, or deleted: the other way then
                    continue
                except (ApiError, ApiUnavailable) as error:
                    log.warning("online correction not saved (kept; saved with the next lesson): %s", error)
                    return
                self._saved = True
                return
