"""How long predictions take in the operator's path: loading, cold and cached queries, batches.

    .venv/bin/python bench/prediction_latency.py [--queries 20000] [--seed 0]

Reports timings (it asserts nothing). The operator asks `slowdowns(gpu, [running..., newcomer])` and
`job(workload, gpu)` for many candidate GPUs; the mix below draws such queries at random from the
Gavel and Muri job configurations in the catalog.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

GPUS = ("k80", "p100", "v100")
CONFIGURATIONS = [
    ("resnet18", (16, 32, 64, 128, 256)),
    ("resnet50", (16, 32, 64, 128)),
    ("transformer", (16, 32, 64, 128, 256)),
    ("lstm-lm", (5, 10, 20, 40, 80)),
    ("recommendation", (512, 1024, 2048, 4096, 8192)),
    ("a3c", (1,)),
    ("cyclegan", (1,)),
    ("vgg16", (32, 64)),
    ("shufflenet_v2_x1_0", (64, 128)),
]


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    start = time.perf_counter()
    from horus_operator.prediction import artifacts, load_predictor
    from horus_operator.prediction.api import Workload
    from horus_operator.prediction.predictor import XGBoostPredictor

    imported = time.perf_counter() - start
    loaded = _timed(load_predictor)
    predictor = load_predictor()
    workloads = [Workload(model, batch) for model, batches in CONFIGURATIONS for batch in batches]
    print(f"import {imported * 1e3:8.1f} ms   load_predictor {loaded * 1e3:8.1f} ms")

    cold_job = _timed(lambda: predictor.job(workloads[0], "v100"))
    cold_pair = _timed(lambda: predictor.slowdowns("v100", workloads[1:3]))
    print(f"first job() {cold_job * 1e3:8.3f} ms   first pair slowdowns() {cold_pair * 1e3:8.3f} ms")

    def query() -> None:
        gpu = rng.choice(GPUS)
        group = rng.sample(workloads, rng.choice((1, 2, 2, 3)))
        predictor.job(group[-1], gpu)
        predictor.slowdowns(gpu, group)

    samples = [_timed(query) for _ in range(args.queries)]
    total = sum(samples)
    print(
        f"{args.queries} mixed queries (job + slowdowns of 1-3 jobs,"
        f" {len(workloads)} configurations x 3 GPUs):"
        f" amortised {total / args.queries * 1e3:.4f} ms, median {statistics.median(samples) * 1e3:.4f} ms,"
        f" p99 {sorted(samples)[int(0.99 * len(samples))] * 1e3:.4f} ms, max {max(samples) * 1e3:.3f} ms"
    )

    # A predictor with empty caches: what `horus predict pairs` pays for a large input file.
    uncached = XGBoostPredictor(artifacts.load())
    batch = [(rng.choice(GPUS), rng.choice(workloads), rng.choice(workloads)) for _ in range(10000)]
    elapsed = _timed(lambda: uncached.pairs(batch))
    print(
        f"pairs() batch of {len(batch)}, cold caches: {elapsed * 1e3:.1f} ms"
        f" ({elapsed / len(batch) * 1e6:.1f} us per pair)"
    )


if __name__ == "__main__":
    main()
