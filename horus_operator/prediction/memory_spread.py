"""How far a predicted GPU memory may be from what the job will hold, by where the prediction comes from,
and the memory a job is given beside others (issue 45, item 4).

Like the slowdown's spread (`placement.base.Limits.caution_sd`), the memory's is stated in log space:
over held-out measured peaks, r = ln(predicted ÷ measured) has mean `bias` (> 0: the envelope
over-predicts on the whole) and standard deviation `sd`, per source of the prediction (`JobPrediction.
memory_source`). A job's *upper bound* is its prediction × e^max(0, MEMORY_CAUTION_SD·sd − bias): the
prediction where its source's errors, less their bias, stay within the caution; more where they do not.
A job shares a GPU only where the upper bounds of everyone on it fit (`sharing_memory_mib`,
`placement.predictions.CachedPredictions.slowdowns`); alone on a GPU it has the whole of it and the
point prediction is read as before. A job whose peak the cluster observed (`OBSERVED`) packs to that
peak plus the spread of repeated readings of one run.

The numbers (`bench/memory_loso.py` prints them, from data/memory/; docs/prediction.md, "Headroom from
uncertainty"):
- GRAPH: a job counted from its graph alone, the catalog's (at its own or another input shape) or an
  ONNX graph it brings, every peak predicted by the envelope refitted without its source: 339 peaks of
  catalog graphs in milabench (H100, H200, L40S) and MISO (A100-40GB), bias 0.365, sd 0.142 → upper
  bound = the prediction (the envelope already is one). No measured peak of a job's own ONNX graph is
  in data/memory/; it is counted by the same code as the catalog's graphs (ONNX exports themselves), so
  it shares their spread rather than one of its own.
- CONFIG: a job that states its memory terms (a Hugging Face config; a stated optimizer): 62 peaks of
  MIGProfiler and MISO by the config route, their source held out, and the 95 published fine-tuning
  peaks of data/memory/published_peaks.csv that the spec can express (nothing fitted on them): 157
  peaks, bias 0.197, sd 0.266 → upper bound 1.40 × the prediction, which covers the least of them (0.71).
- OBSERVED: a job's own peak read by the node agent: repeated runs of one configuration in milabench
  (101 configurations run 2-3 times each, 232 runs) read the same peak within a log sd of 0.0017 →
  1.0034 × the peak (the largest repeat's spread is 2.4 %). What the first minute alone does not show
  (a later evaluation phase) it does not cover; `Limits.memory_margin_mib` is kept free beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from horus_operator.prediction.api import JobPrediction
from horus_operator.prediction.features import MEMORY_NAMES

GRAPH, CONFIG, OBSERVED = "graph", "config", "observed"
MEMORY_CAUTION_SD = 2.0  # as `Limits.caution_sd`: the upper end is this many standard deviations out


@dataclass(frozen=True)
class MemorySpread:
    """ln(predicted ÷ measured) over held-out peaks of one source of prediction."""

    bias: float  # its mean
    sd: float  # its standard deviation
    samples: int  # how many peaks it was measured on

    def upper_factor(self, caution_sd: float = MEMORY_CAUTION_SD) -> float:
        """What the prediction is multiplied by for its upper bound (never below 1)."""
        return math.exp(max(0.0, caution_sd * self.sd - self.bias))


def log_spread(predicted_over_measured: np.ndarray) -> MemorySpread:
    """The spread of a set of predicted ÷ measured peaks (what the benches print and the constants are)."""
    logs = np.log(predicted_over_measured)
    return MemorySpread(
        bias=round(float(logs.mean()), 3), sd=round(float(logs.std(ddof=1)), 4), samples=len(logs)
    )


MEMORY_SPREADS: Mapping[str, MemorySpread] = {
    GRAPH: MemorySpread(bias=0.365, sd=0.142, samples=339),
    CONFIG: MemorySpread(bias=0.197, sd=0.2661, samples=157),
    OBSERVED: MemorySpread(bias=0.0, sd=0.0017, samples=232),
}


def source_of(job_features: Mapping[str, float] | None, observed: bool = False) -> str:
    """The source of a job's predicted memory: an observed peak, its memory terms
    (`features.MEMORY_NAMES`), or its graph (the catalog's where it brings no features)."""
    if observed:
        return OBSERVED
    if job_features is not None and any(name in job_features for name in MEMORY_NAMES):
        return CONFIG
    return GRAPH


def sharing_memory_mib(prediction: JobPrediction) -> float:
    """The memory a job is given on a GPU it shares: its upper bound by the spread of its prediction's
    source; its prediction where the predictor names no source it was measured on."""
    spread = MEMORY_SPREADS.get(prediction.memory_source)
    return prediction.memory_mib if spread is None else prediction.memory_mib * spread.upper_factor()
