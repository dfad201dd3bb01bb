"""Queue orders side by side in one run (issue #28): fifo vs shortest-remaining vs las under horus.

Each workload is replayed once per order, with the same jobs, the same policy (horus, decisions from the
shipped predictions, progress from Gavel's measured pairs) and a day's starvation bound alone (fifo's and
las's default; shortest-remaining's before issue 46, whose default is now `-due`'s):
- `fifo` — the default, first come first served;
- `srpt-est` — shortest-remaining on the lengths the operator would know: predicted step time × steps
  (`horus simulate --durations estimated`; the steps are Muri's iterations where the trace gives them);
  jobs with no steps or no predicted step time have no length;
- `srpt-true` — shortest-remaining on the trace's true lengths (an oracle, for scale);
- `las` — least attained service, which reads no lengths, with preemption (`placement/preemption.py`:
  a waiting job may preempt running jobs of more attained service, which queue again with their
  progress kept and pay the grace period plus restart cost, 150 s, when they restart);
- `las-nopreempt` — las without preemption (what las was before it: fifo by arrival);
- `srpt-est-nobound` — srpt-est without the starvation bound, to show what the bound costs and buys;
- `srpt-est-due`, `srpt-true-due` — srpt-est and srpt-true with `--starvation-multiple` 10 beside the
  day: a job is due once it has waited 10× its length, and the starved line up by when they were due
  (`queueorder.Starvation.due_at`), where without a multiple they line up by arrival. Shortest-remaining's
  default bound since issue 46 (`Starvation.of`).

Per order: mean and p99 JCT, mean and max wait (until a job first starts), makespan, QoS violations
(jobs above maxSlowdown), mean JCT and makespan over fifo's, and preemptions. Targets (issue #28):
srpt-est's mean JCT ≤ 0.85× fifo's with its makespan ≤ 1.01× fifo's; las's mean JCT below fifo's.

Workloads: horus-2500 and gavel-generator (seed 1), and the copied traces in data/traces/ (Gavel,
Muri, Alibaba openb) at their loaders' defaults (64 V100s).

`--real-mix` (issue 46) runs instead the table of the issue on `real-mix-900` (1/2/4/8-GPU jobs in a real
cluster's mix, 8 nodes x 8 V100, Gavel's measured V100 pairs as truth; `sim/workloads.py`): horus,
binpack and exclusive, each in the orders listed in `REAL_MIX_RUNS`, horus deciding from truth and from
predictions, with per run mean JCT, makespan, the eight-GPU jobs' mean wait, jobs co-located and QoS
violations, and mean JCT and makespan over binpack's best mean JCT's run (any order, any bound).

    .venv/bin/python bench/queue_order.py [--real-mix] [--seeds N] [--out out/bench/queue_order.json]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.queueorder import DEFAULT_STARVATION_MULTIPLE, Ordering, QueueOrder, Starvation
from horus_operator.placement.registry import make_policy
from horus_operator.prediction.api import Predictor
from horus_operator.prediction.measured import TruthTable, gavel_truth
from horus_operator.prediction.predictor import load_predictor
from horus_operator.sim.durations import Durations, remaining
from horus_operator.sim.engine import Simulation
from horus_operator.sim.metrics import summarise
from horus_operator.sim.oracle import OraclePredictor
from horus_operator.sim.preemption import Preempting
from horus_operator.sim.results import RunResult
from horus_operator.sim.traces import load_trace
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, gavel_generator, horus_2500, real_mix_900

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "out" / "bench" / "queue_order.json"  # --real-mix: real_mix.json beside it
TRACES = (
    "gavel_small_test.trace",
    "gavel_artifact_evaluation.trace",
    "muri_cluster_trace.csv",
    "muri_trace1.csv",
    "alibaba_openb_pod_list_default.csv",
)
SEED = 1
# The starvation multiple of the `-due` rows: shortest-remaining's default.
DUE_MULTIPLE = DEFAULT_STARVATION_MULTIPLE
# label -> (order, where it reads lengths, starvation bound, preemption under las)
ORDERS = {
    "fifo": (QueueOrder.FIFO, Durations.ESTIMATED, Starvation(), False),
    "srpt-est": (QueueOrder.SHORTEST_REMAINING, Durations.ESTIMATED, Starvation(), False),
    "srpt-true": (QueueOrder.SHORTEST_REMAINING, Durations.TRUTH, Starvation(), False),
    "las": (QueueOrder.LAS, Durations.ESTIMATED, Starvation(), True),
    "las-nopreempt": (QueueOrder.LAS, Durations.ESTIMATED, Starvation(), False),
    "srpt-est-nobound": (
        QueueOrder.SHORTEST_REMAINING,
        Durations.ESTIMATED,
        Starvation(max_wait_s=None),
        False,
    ),
    "srpt-est-due": (
        QueueOrder.SHORTEST_REMAINING,
        Durations.ESTIMATED,
        Starvation(length_multiple=DUE_MULTIPLE),
        False,
    ),
    "srpt-true-due": (
        QueueOrder.SHORTEST_REMAINING,
        Durations.TRUTH,
        Starvation(length_multiple=DUE_MULTIPLE),
        False,
    ),
}
HOUR = 3600.0
# Issue 46's table: its orders (`ORDERS` and binpack's, shortest-remaining on true lengths without a
# bound) and its runs, (policy, decides from, order label).
REAL_MIX_ORDERS = ORDERS | {
    "srpt-true-nobound": (
        QueueOrder.SHORTEST_REMAINING,
        Durations.TRUTH,
        Starvation(max_wait_s=None),
        False,
    ),
}
REAL_MIX_RUNS = (
    ("binpack", "predictions", "fifo"),
    ("binpack", "predictions", "srpt-true-nobound"),
    ("binpack", "predictions", "srpt-true"),
    ("binpack", "predictions", "srpt-true-due"),
    ("binpack", "predictions", "las"),
    ("exclusive", "predictions", "fifo"),
    ("exclusive", "predictions", "srpt-true-nobound"),
    ("horus", "truth", "fifo"),
    ("horus", "truth", "srpt-true-nobound"),
    ("horus", "truth", "srpt-true"),
    ("horus", "truth", "srpt-true-due"),
    ("horus", "truth", "las"),
    ("horus", "predictions", "fifo"),
    ("horus", "predictions", "srpt-true-nobound"),
    ("horus", "predictions", "srpt-est-nobound"),
    ("horus", "predictions", "srpt-est"),
    ("horus", "predictions", "srpt-est-due"),
    ("horus", "predictions", "las"),
)


def scenarios(table: TruthTable) -> dict[str, Scenario]:
    made = {
        "horus-2500": horus_2500(table, random.Random(SEED)),
        "gavel-generator": gavel_generator(table, random.Random(SEED)),
    }
    for name in TRACES:
        made[name] = load_trace(REPO / "data" / "traces" / name, table, random.Random(SEED), None)
    return made


def run_order(
    scenario: Scenario,
    label: str,
    table: TruthTable,
    truth: Truth,
    predictor: Predictor,
    policy_name: str = "horus",
    deciding: Predictor | None = None,
) -> dict[str, float | int]:
    """One replay of `scenario` under `policy_name` in order `label`, deciding with `deciding` (else
    `predictor`, which the estimated lengths always come from)."""
    order, durations, starvation, preempts = REAL_MIX_ORDERS[label]
    lengths = remaining(durations, scenario, table, predictor)
    ordering = Ordering(order, starvation=starvation, remaining=lengths)
    policy = make_policy(policy_name, predictor=deciding or predictor, rng=random.Random(SEED))
    cycle = SchedulingCycle(policy, ordering=ordering)
    preempting = Preempting() if preempts else None
    result = Simulation(scenario, cycle, truth, preemption=preempting).run()
    summary = summarise(result, scenario)
    eight = [record.wait_s for record in result.records if record.gpus == 8]
    return {
        "mean_jct_h": summary["mean_jct_s"] / HOUR,
        "p99_jct_h": summary["p99_jct_s"] / HOUR,
        "mean_wait_h": summary["mean_wait_s"] / HOUR,
        "max_wait_h": max_wait_s(result) / HOUR,
        "makespan_h": summary["makespan_s"] / HOUR,
        "qos_violations": summary["qos_violations"],
        "jobs": summary["jobs"],
        "preemptions": len(preempting.made) if preempting else 0,
        "eight_gpu_mean_wait_h": sum(eight) / len(eight) / HOUR if eight else 0.0,
        "colocated_jobs": sum(record.colocated_s > 0 for record in result.records),
    }


def real_mix(table: TruthTable, truth: Truth, predictor: Predictor, seeds: int) -> list[dict]:
    """The issue's table on real-mix-900, per seed: every run of `REAL_MIX_RUNS`, with mean JCT and
    makespan over those of binpack's run of least mean JCT."""
    oracle = OraclePredictor(truth, predictor)
    print(
        "seed  policy     decides      order              mean JCT h  makespan h  8-GPU wait h  co-located"
        "  QoS  JCT/binpack-best  makespan/binpack-best"
    )
    rows = []
    for seed in range(1, seeds + 1):
        scenario = real_mix_900(table, random.Random(seed))
        results = {
            run: run_order(
                scenario, run[2], table, truth, predictor, run[0], oracle if run[1] == "truth" else None
            )
            for run in REAL_MIX_RUNS
        }
        best = min((r for run, r in results.items() if run[0] == "binpack"), key=lambda r: r["mean_jct_h"])
        for (name, decides, label), r in results.items():
            jct, makespan = r["mean_jct_h"] / best["mean_jct_h"], r["makespan_h"] / best["makespan_h"]
            rows.append(
                {"workload": scenario.name, "seed": seed, "policy": name, "decides": decides, "order": label}
                | r
                | {
                    "mean_jct_over_binpack_best": round(jct, 3),
                    "makespan_over_binpack_best": round(makespan, 3),
                }
            )
            print(
                f"{seed:>4}  {name:<10} {decides:<12} {label:<18} {r['mean_jct_h']:>10.2f}"
                f" {r['makespan_h']:>11.1f} {r['eight_gpu_mean_wait_h']:>13.1f} {r['colocated_jobs']:>11}"
                f" {r['qos_violations']:>4} {jct:>17.3f} {makespan:>22.3f}"
            )
    return rows


def max_wait_s(result: RunResult) -> float:
    return max((record.start_s - record.arrival_s for record in result.records), default=0.0)


def known_lengths(scenario: Scenario, table: TruthTable, predictor: Predictor) -> float:
    """The share of jobs whose length the estimate knows."""
    estimate = remaining(Durations.ESTIMATED, scenario, table, predictor)
    return sum(estimate(job.request) is not None for job in scenario.jobs) / max(len(scenario.jobs), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--real-mix", action="store_true", help="only the issue-46 table on real-mix-900")
    parser.add_argument("--seeds", type=int, default=1, help="--real-mix: seeds 1..N")
    args = parser.parse_args()
    table = gavel_truth()
    predictor = load_predictor()
    truth = Truth(table, fallback=predictor)
    if args.real_mix:
        out = args.out if args.out != DEFAULT_OUT else DEFAULT_OUT.with_name("real_mix.json")
        write(out, real_mix(table, truth, predictor, args.seeds))
        return
    rows = []
    print(
        "workload                           order            mean JCT h  p99 JCT h  mean wait h  max wait h"
        "  makespan h  QoS   JCT/fifo  makespan/fifo  preemptions"
    )
    for name, scenario in scenarios(table).items():
        results = {label: run_order(scenario, label, table, truth, predictor) for label in ORDERS}
        fifo = results["fifo"]
        known = known_lengths(scenario, table, predictor)
        for label, r in results.items():
            jct_ratio = r["mean_jct_h"] / fifo["mean_jct_h"]
            makespan_ratio = r["makespan_h"] / fifo["makespan_h"]
            rows.append(
                {"workload": name, "order": label, "known_lengths": round(known, 3), **r}
                | {"mean_jct_over_fifo": round(jct_ratio, 3), "makespan_over_fifo": round(makespan_ratio, 3)}
            )
            print(
                f"{name:<34} {label:<16} {r['mean_jct_h']:>10.2f} {r['p99_jct_h']:>10.1f}"
                f" {r['mean_wait_h']:>12.2f} {r['max_wait_h']:>11.1f} {r['makespan_h']:>11.1f}"
                f" {r['qos_violations']:>4} {jct_ratio:>10.3f} {makespan_ratio:>14.3f} {r['preemptions']:>12}"
            )
        print(f"{'':<34} (lengths known to the estimate: {known:.0%} of {fifo['jobs']} jobs)")
    write(args.out, rows)


def write(out: Path, rows: list[dict]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
