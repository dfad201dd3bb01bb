"""The observed co-location dataset in size-capped ConfigMaps (labelled horus.dev/dataset=colocation, in
the operator's namespace). Each ConfigMap is a valid CSV on its own (`observations.csv`, with header) plus
the pair ids it recorded (`pairs`), so `kubectl get cm -l horus.dev/dataset=colocation` exports it too.
Blocking calls of the `Kube` adapter: the operator runs them in its thread pool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from horus_operator.api import keys
from horus_operator.operator.kube import Kube, load_client
from horus_operator.operator.telemetry import observed
from horus_operator.operator.telemetry.observed import Chunk

DATASET = "colocation"
CSV_KEY = "observations.csv"
PAIRS_KEY = "pairs"
NAME_PREFIX = "horus-observations-"
MAX_CHUNK_BYTES = 256 * 1024  # well under the 1 MiB ConfigMap limit
MAX_CHUNKS = 16  # about 4 MiB of rows (tens of thousands of pairs); the oldest go first


class ObservationStore:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        max_chunk_bytes: int = MAX_CHUNK_BYTES,
        max_chunks: int = MAX_CHUNKS,
    ) -> None:
        self._kube, self._namespace = kube, namespace
        self._max_chunk_bytes, self._max_chunks = max_chunk_bytes, max_chunks

    def load(self) -> tuple[Chunk, ...]:
        maps = self._kube.list_config_maps(self._namespace, f"{keys.LABEL_DATASET}={DATASET}")
        chunks = (_chunk(m) for m in maps if m["metadata"]["name"].startswith(NAME_PREFIX))
        return tuple(sorted(chunks, key=lambda c: c.index))

    def record(self, row: tuple[str, ...], pair: str) -> bool:
        """Appends one co-location row unless its pair is already recorded; True when it was added."""
        before = self.load()
        after = observed.appended(before, row, pair, max_bytes=self._max_chunk_bytes)
        if after == before:
            return False
        kept, dropped = observed.dropped_oldest(after, max_chunks=self._max_chunks)
        self._write(kept[-1], exists=len(after) == len(before))
        for chunk in dropped:
            self._delete(chunk)
        return True

    def _write(self, chunk: Chunk, *, exists: bool) -> None:
        body = {
            "metadata": {"name": _name(chunk.index), "labels": {keys.LABEL_DATASET: DATASET}},
            "data": {CSV_KEY: observed.export_csv([chunk]), PAIRS_KEY: "\n".join(chunk.pairs)},
        }
        self._kube.put_config_map(self._namespace, body, exists=exists)

    def _delete(self, chunk: Chunk) -> None:
        self._kube.delete_config_map(self._namespace, _name(chunk.index))


def export_from_cluster(namespace: str) -> str:
    """The whole dataset as one CSV (what `horus agent export-observations` writes)."""
    kube = Kube(load_client(pool_size=1), workers=1)
    try:
        return observed.export_csv(ObservationStore(kube, namespace).load())
    finally:
        kube.close()


def _name(index: int) -> str:
    return f"{NAME_PREFIX}{index:05d}"


def _chunk(config_map: Mapping[str, Any]) -> Chunk:
    data = config_map.get("data") or {}
    lines = [line for line in data.get(CSV_KEY, "").splitlines() if line]
    return Chunk(
        index=int(config_map["metadata"]["name"].removeprefix(NAME_PREFIX)),
        rows=tuple(lines[1:]),  # the first line is the header
        pairs=tuple(p for p in data.get(PAIRS_KEY, "").splitlines() if p),
    )
