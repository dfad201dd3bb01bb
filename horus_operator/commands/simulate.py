"""`horus simulate`: replay a workload under several policies and compare them.

    horus simulate --workload horus-2500|real-mix-900|synthetic|gavel-generator|FILE
                   --policy horus,exclusive,binpack
                   [--truth FILE.csv] [--seed N] [--jobs N] [--gpus M] [--gpu TYPE] [--models DIR]
                   [--truth-models DIR] [--host-cpus FILE.csv]
                   [--decide-with predictions|truth] [--online-learning] [--time-sliced]
                   [--queue-order fifo|shortest-remaining|las] [--durations estimated|truth]
                   [--max-wait-seconds S] [--starvation-multiple K] [--no-preemption]
                   [--migration] [--restart-cost-seconds S] [--grace-period-seconds S] --output DIR

writes DIR/summary.json (one object per policy, keys in `sim.metrics.SUMMARY_KEYS`), DIR/details.json,
DIR/jobs_<policy>.csv and PNG plots, and prints the comparison table.
"""

from __future__ import annotations

import random
from pathlib import Path

import click

from horus_operator.commands.queueing import queue_options
from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.moves import MoveSettings
from horus_operator.placement.preemption import PreemptionSettings
from horus_operator.placement.queueorder import Ordering, QueueOrder, Starvation
from horus_operator.placement.registry import POLICIES, make_policy
from horus_operator.prediction import timeslicing
from horus_operator.prediction.api import Predictor
from horus_operator.prediction.correction import CorrectedPredictor
from horus_operator.prediction.gpus import GPU_SPECS
from horus_operator.prediction.measured import GAVEL_HOST_CPUS, GAVEL_PAIRS, TruthTable, read_host_cpus
from horus_operator.sim.durations import Durations, remaining
from horus_operator.sim.engine import Simulation
from horus_operator.sim.learning import OnlineLearning
from horus_operator.sim.metrics import details, summarise
from horus_operator.sim.migration import DEFAULT_GRACE_S, Migration
from horus_operator.sim.oracle import OraclePredictor
from horus_operator.sim.preemption import Preempting
from horus_operator.sim.report import table, write_outputs
from horus_operator.sim.traces import load_trace
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import (
    DEFAULT_GPU,
    Scenario,
    gavel_generator,
    horus_2500,
    real_mix_900,
    synthetic,
)

# What Gavel's command lines kept busy on the CPU beside each model's training loop: the default
# truth's jobs carry it, as their pods would declare it.
PROGRESS_FROM_JOBS = 10_000  # a progress bar on runs at least this long


def _scenario(
    workload: str, table_: TruthTable, seed: int, jobs: int | None, gpus: int | None, gpu: str | None
) -> Scenario:
    rng = random.Random(seed)
    if gpu is not None and gpu not in GPU_SPECS:
        raise click.BadParameter(f"--gpu {gpu!r}: not a GPU type Horus knows ({', '.join(GPU_SPECS)})")
    gpu = gpu or DEFAULT_GPU
    generated = workload in ("horus-2500", "real-mix-900", "synthetic", "gavel-generator")
    if generated and not table_.configs(gpu):
        # The generators draw configurations and their throughputs from the truth table's measurements.
        measured = sorted({g for g, _, _ in table_.isolated})
        raise click.BadParameter(f"--gpu {gpu!r}: the truth table measured only {', '.join(measured)}")
    if workload == "horus-2500":
        if jobs is not None or gpus is not None:
            raise click.UsageError("horus-2500 is fixed (2,500 jobs, 64 GPUs); use --workload synthetic")
        return horus_2500(table_, rng, gpu=gpu)
    if workload == "real-mix-900":
        if jobs is not None or gpus is not None:
            raise click.UsageError("real-mix-900 is fixed (900 jobs of 1-8 GPUs, 8 nodes x 8 GPUs)")
        return real_mix_900(table_, rng, gpu=gpu)
    if workload == "synthetic":
        return synthetic(table_, rng, jobs=jobs or 2500, gpus=gpus or 64, gpu=gpu)
    if workload == "gavel-generator":
        return gavel_generator(table_, rng, jobs=jobs or 300, gpus=gpus or 32, gpu=gpu)
    path = Path(workload)
    if not path.is_file():
        raise click.BadParameter(
            f"{workload!r} is neither horus-2500, real-mix-900, synthetic, gavel-generator nor a trace file"
        )
    try:
        return load_trace(path, table_, rng, gpus, gpu)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--workload") from None


def _ordering(
    queue_order: str,
    durations: str,
    max_wait_seconds: float | None,
    starvation_multiple: float | None,
    scenario: Scenario,
    table_: TruthTable,
    predictor: Predictor,
) -> Ordering:
    """The queue order, its starvation bound and the lengths it reads (`sim/durations.py`)."""
    order = QueueOrder(queue_order)
    return Ordering(
        order,
        starvation=Starvation.of(order, max_wait_seconds, starvation_multiple),
        remaining=remaining(Durations(durations), scenario, table_, predictor),
    )


def _predictor(models: str | None) -> Predictor:
    from horus_operator.prediction.predictor import load_predictor

    return load_predictor(models)


def _learning(predictor: Predictor, scenario: Scenario) -> OnlineLearning:
    memory_mib = scenario.nodes[0].gpus[0].memory_mib if scenario.nodes and scenario.nodes[0].gpus else None
    return OnlineLearning(CorrectedPredictor(predictor), scenario.gpu, memory_mib)


@click.command()
@click.option(
    "--workload",
    required=True,
    help="horus-2500, real-mix-900 (1/2/4/8-GPU jobs in a real cluster's mix), synthetic, gavel-generator, "
    "or a Gavel/Muri/Alibaba trace file or a Horus plain CSV "
    "(job_id,submit_s,gpus,duration_s,model,batch_size[,max_slowdown,priority]; docs/simulator.md)",
)
@click.option("--policy", "policy_names", default="horus,exclusive,binpack", show_default=True)
@click.option("--truth", "truth_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--host-cpus",
    "host_cpus_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CSV model,host_cpus: CPU cores each model's jobs keep busy beside the training loop, as their "
    "pods would declare [default: Gavel's, with the default truth; none otherwise]",
)
@click.option("--seed", default=1, show_default=True, type=int)
@click.option("--jobs", type=int, help="synthetic, gavel-generator: number of jobs")
@click.option("--gpus", type=int, help="synthetic, gavel-generator or traces: number of GPUs")
@click.option(
    "--gpu",
    help="the GPU type of every node [default: v100]; for the generators and Gavel traces one the truth "
    "table measured (their throughputs come from it), for the other traces any type Horus knows",
)
@click.option("--models", type=click.Path(file_okay=False), help="prediction models directory")
@click.option(
    "--truth-models",
    type=click.Path(file_okay=False),
    help="models that stand in for truth where the truth table has no pair [default: --models]; e.g. "
    "the shipped models while --models never saw the GPU",
)
@click.option(
    "--decide-with",
    type=click.Choice(["predictions", "truth"]),
    default="predictions",
    show_default=True,
    help="truth: policies see measured slowdowns (an oracle, to separate policy from prediction error)",
)
@click.option(
    "--online-learning",
    is_flag=True,
    help="policies decide with the online correction, fed each finished interval's true slowdown as the "
    "operator's telemetry would (docs/operator.md, 'Online correction')",
)
@click.option(
    "--time-sliced",
    is_flag=True,
    help="co-tenants time-slice each GPU (no MPS), as where the truth was measured so: each job's predicted "
    "slowdown is at least its busy fraction over its fair share of the GPU's time, and at most the "
    "time-sharing prior's answer where its observed busy fraction fits that share "
    "(prediction/timeslicing.py); decisions from truth are unchanged",
)
@click.option(
    "--migration",
    is_flag=True,
    help="move running jobs as the operator would (placement/moves.py): off a GPU where their true "
    "slowdown stays above maxSlowdown, and apart onto a freed GPU when it pays; every job allows it",
)
@click.option(
    "--restart-cost-seconds",
    type=float,
    default=MoveSettings().restart_cost_s,
    show_default=True,
    help="--migration, las preemption: progress a move or a preemption loses beyond the grace period",
)
@click.option(
    "--grace-period-seconds",
    type=float,
    default=DEFAULT_GRACE_S,
    show_default=True,
    help="--migration, las preemption: every job's spec.migration.gracePeriodSeconds",
)
@queue_options(environment=False)
@click.option(
    "--preemption/--no-preemption",
    default=True,
    show_default=True,
    help="--queue-order las: a waiting job may preempt running jobs of more attained GPU-service, which "
    "queue again with their progress kept (placement/preemption.py); no other order preempts",
)
@click.option(
    "--durations",
    type=click.Choice([kind.value for kind in Durations]),
    default=Durations.ESTIMATED.value,
    show_default=True,
    help="the job lengths the queue order reads: estimated (predicted step time x steps, as the operator "
    "knows them) or truth (the trace's)",
)
@click.option("--output", required=True, type=click.Path(file_okay=False, path_type=Path))
def simulate(
    workload: str,
    policy_names: str,
    truth_path: Path | None,
    host_cpus_path: Path | None,
    seed: int,
    jobs: int | None,
    gpus: int | None,
    gpu: str | None,
    models: str | None,
    truth_models: str | None,
    decide_with: str,
    online_learning: bool,
    time_sliced: bool,
    migration: bool,
    restart_cost_seconds: float,
    grace_period_seconds: float,
    queue_order: str,
    durations: str,
    max_wait_seconds: float,
    starvation_multiple: float | None,
    preemption: bool,
    output: Path,
) -> None:
    """Simulate WORKLOAD under each policy: decisions from predictions, progress from measured truth."""
    names = [name.strip() for name in policy_names.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown or not names:
        raise click.BadParameter(f"unknown policy {', '.join(unknown)!r}; known: {', '.join(POLICIES)}")
    if online_learning and decide_with == "truth":
        raise click.UsageError("--online-learning corrects predictions; --decide-with truth needs none")
    truth_path = truth_path or GAVEL_PAIRS
    if not truth_path.is_file():
        raise click.UsageError(f"no truth table at {truth_path}; pass --truth FILE.csv")
    if host_cpus_path is None and truth_path.resolve() == GAVEL_PAIRS.resolve():
        host_cpus_path = GAVEL_HOST_CPUS
    truth_table = TruthTable.from_csv(truth_path, read_host_cpus(host_cpus_path) if host_cpus_path else None)
    predictor = _predictor(models)
    truth = Truth(truth_table, fallback=_predictor(truth_models) if truth_models else predictor)
    deciding = OraclePredictor(truth, predictor) if decide_with == "truth" else predictor
    scenario = _scenario(workload, truth_table, seed, jobs, gpus, gpu)
    progress = len(scenario.jobs) >= PROGRESS_FROM_JOBS
    ordering = _ordering(
        queue_order, durations, max_wait_seconds, starvation_multiple, scenario, truth_table, predictor
    )
    results, summaries, extra = [], {}, {}
    for name in names:
        learning = _learning(predictor, scenario) if online_learning else None
        decides = learning.predictor if learning else deciding  # each policy learns on its own
        if time_sliced and decide_with == "predictions":
            decides = timeslicing.time_sliced(decides)
        policy = make_policy(name, predictor=decides, rng=random.Random(seed))
        cycle = SchedulingCycle(policy, ordering=ordering)
        moving = (
            Migration(MoveSettings(restart_cost_s=restart_cost_seconds), grace_period_seconds)
            if migration
            else None
        )
        preempting = (
            Preempting(PreemptionSettings(grace_period_seconds, restart_cost_seconds))
            if preemption and ordering.order == QueueOrder.LAS
            else None
        )
        result = Simulation(
            scenario,
            cycle,
            truth,
            progress=progress,
            learning=learning,
            migration=moving,
            preemption=preempting,
        ).run()
        results.append(result)
        summaries[name] = summarise(result, scenario)
        extra[name] = details(result) | ({"online_learning": learning.summary()} if learning else {})
    extra["scenario"] = {
        "name": scenario.name,
        "jobs": len(scenario.jobs),
        "gpus": scenario.gpu_count,
        "seed": seed,
        "truth": str(truth_path),
        "decide_with": decide_with,
        "online_learning": online_learning,
        "migration": migration,
        **({"time_sliced": True} if time_sliced else {}),  # absent otherwise: earlier runs' files stay equal
        "queue_order": queue_order,
        **({"preemption": preemption} if queue_order == QueueOrder.LAS else {}),
        "durations": durations,
        "max_wait_s": max_wait_seconds,
        "starvation_multiple": ordering.starvation.length_multiple,  # the order's default where unset
        "models": models or "shipped",
        "truth_models": truth_models or models or "shipped",
        "assumptions": list(scenario.notes),
    }
    plots = write_outputs(output, results, summaries, extra)
    click.echo(f"{scenario.name}: {len(scenario.jobs)} jobs on {scenario.gpu_count} GPUs, seed {seed}")
    click.echo(table(summaries))
    click.echo(f"summary: {output / 'summary.json'}")
    click.echo("plots: " + ", ".join(str(path) for path in plots))
