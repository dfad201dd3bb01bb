"""Replaying published job traces as simulator scenarios; every assumption is listed in `Scenario.notes`.

The format is recognised from the file name and header:
- **Gavel** `*.trace` (tab-separated: job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time): job types such as
  "ResNet-18 (batch size 64)" map to the colocation names; steps and arrival (seconds) are taken as
  given; scale_factor is the GPU count; priority_weight, rounded, is the priority.
- **Muri** CSV (job_id, num_gpu, submit_time, iterations, model_name, batch_size, duration, ...,
  iteration_time, ..., priority): times are taken to be **milliseconds** (the source does not say;
  duration ≈ iterations x iteration_time holds, and milliseconds give per-iteration times of 0.1–1 s);
  priority as given (higher first, as a DLJob's spec.priority).
- **Horus plain CSV** (`job_id,submit_s,gpus,duration_s,model,batch_size[,max_slowdown[,priority]]`,
  the project's own, for replaying a cluster's logs; `docs/simulator.md` describes it): seconds as
  given, each job's maxSlowdown (drawn from the horus-2500 mix where the column is absent or empty) and
  priority (0 where absent or empty). A bad value is an error naming the row and column.
- **Alibaba openb** pod list (name, cpu_milli, memory_mib, num_gpu, gpu_milli, ..., creation_time,
  deletion_time, scheduled_time): no model names, so each pod gets a configuration from the truth
  table drawn with the seeded RNG; duration = deletion - creation (seconds); a pod asking for a share
  of one GPU (gpu_milli < 1000) is a single-GPU job; CPU-only pods are skipped; the trace has a QoS
  class but no priority, so every pod has priority 0.

Common assumptions: the cluster is homogeneous, of one GPU type (`--gpu`, V100 unless given: throughputs
of Gavel traces from the truth table's measurements on it; durations of the others are the trace's own,
taken to be on that GPU), 8 GPUs per node so multi-GPU jobs fit; a job asking for more GPUs than a
node has is clipped to one node with its GPU-time kept (placement is single-node); maxSlowdown is drawn
from the same mix as horus-2500 unless the trace has one (Gavel's SLO, the plain CSV's max_slowdown); a
model missing from the truth table runs at the trace's own speed, and its co-location slowdowns come
from the predictor (counted against `truth_coverage`).
"""

from __future__ import annotations

import csv
import math
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.workloads import (
    DEFAULT_GPU,
    Scenario,
    SimJob,
    WorkloadPool,
    cluster,
    draw_max_slowdown,
)

PLAIN_COLUMNS = ("job_id", "submit_s", "gpus", "duration_s", "model", "batch_size")
PLAIN_OPTIONAL = ("max_slowdown", "priority")

N = TypeVar("N", int, float)
GPUS_PER_NODE = 8
DEFAULT_TRACE_GPUS = 64
GAVEL_NAMES = {
    "resnet-18": "resnet18",
    "resnet-50": "resnet50",
    "transformer": "transformer",
    "lm": "lstm-lm",
    "recommendation": "recommendation",
    "a3c": "a3c",
    "cyclegan": "cyclegan",
}


def load_trace(
    path: Path, table: TruthTable, rng: random.Random, gpus: int | None, gpu: str = DEFAULT_GPU
) -> Scenario:
    """`path` replayed on `gpus` GPUs (64 unless given) of type `gpu`; ValueError on a file it cannot read."""
    header = path.open().readline()
    site = Site(gpus or DEFAULT_TRACE_GPUS, gpu)
    if path.suffix == ".trace":
        return _gavel(path, table, rng, site)
    if header.startswith("job_id,num_gpu"):
        return _muri(path, rng, site)
    if header.startswith("job_id,submit_s"):
        return _plain(path, rng, site)
    if header.startswith("name,cpu_milli"):
        return _alibaba(path, table, rng, site)
    raise ValueError(
        f"{path}: not a Gavel .trace, a Muri CSV, a Horus plain CSV ({','.join(PLAIN_COLUMNS)}) or an "
        "Alibaba openb pod list"
    )


@dataclass(frozen=True)
class Site:
    """The cluster a trace is replayed on: `gpus` GPUs of type `gpu`."""

    gpus: int
    gpu: str


def _job(
    key: str,
    workload: Workload,
    gpus: int,
    arrival_s: float,
    duration_s: float,
    max_slowdown: float,
    priority: int = 0,
    steps: float | None = None,
) -> SimJob:
    """A job that runs `duration_s` alone, its progress counted in seconds of isolated work (traces give
    times, and slowdowns are ratios, so steps/s need not be known); clipped to one node keeping its
    GPU-time. `steps`: the steps the trace gives, scaled as the clip scales the time."""
    width = min(max(gpus, 1), GPUS_PER_NODE)
    run_s = duration_s * max(gpus, 1) / width
    request = JobRequest(key, workload, width, max_slowdown, priority, arrival_s, remaining_s=run_s)
    trace_steps = None if steps is None else steps * max(gpus, 1) / width
    return SimJob(request, total_steps=run_s, steps_per_s_alone=1.0, trace_steps=trace_steps)


def _scenario(name: str, jobs: list[SimJob], site: Site, notes: tuple[str, ...]) -> Scenario:
    jobs.sort(key=lambda job: (job.arrival_s, job.request.key))
    first = jobs[0].arrival_s if jobs else 0.0
    shared = WorkloadPool()
    shifted = tuple(
        replace(
            job,
            request=replace(
                job.request, submitted_at=job.arrival_s - first, workload=shared(job.request.workload)
            ),
        )
        for job in jobs
    )
    common = (
        f"homogeneous {site.gpu.upper()} cluster, {GPUS_PER_NODE} GPUs per node",
        "jobs wider than a node are clipped to one node, GPU-time kept",
    )
    nodes = cluster(site.gpus, GPUS_PER_NODE, product=site.gpu)
    return Scenario(name, shifted, nodes, site.gpu, common + notes)


def _gavel(path: Path, table: TruthTable, rng: random.Random, site: Site) -> Scenario:
    jobs = []
    with path.open() as handle:
        for number, line in enumerate(handle):
            fields = line.rstrip("\n").split("\t")
            job_type, total_steps, scale_factor, priority_weight, slo, arrival = (
                fields[0],
                float(fields[5]),
                int(fields[6]),
                float(fields[7]),
                float(fields[8]),
                float(fields[9]),
            )
            match = re.match(r"(.+?)(?: \(batch size (\d+)\))?$", job_type)
            assert match is not None
            model = GAVEL_NAMES[match.group(1).lower()]
            batch = int(match.group(2) or 1)
            throughput = _isolated_throughput(table, model, batch, site.gpu)
            if throughput is None:
                raise ValueError(f"{path}:{number + 1}: {model} has no isolated {site.gpu} throughput at all")
            max_slowdown = slo if slo > 0 else draw_max_slowdown(rng)
            duration_s = total_steps / throughput
            key = f"gavel-{number:05d}"
            workload, priority = Workload(model, batch), round(priority_weight)
            jobs.append(_job(key, workload, scale_factor, arrival, duration_s, max_slowdown, priority))
    notes = (
        "Gavel steps and seconds as given; SLO -1 means none; priority_weight rounded is the priority",
        "isolated throughput of a batch size the truth lacks: log-log interpolation between measured ones",
    )
    return _scenario(path.stem, jobs, site, notes)


def _isolated_throughput(table: TruthTable, model: str, batch: int, gpu: str) -> float | None:
    """Measured steps/s alone on `gpu`; for a batch size the table lacks, interpolated log-log between
    the model's nearest measured batch sizes (the nearest one at either end)."""
    measured = sorted((b, tput) for (g, m, b), tput in table.isolated.items() if g == gpu and m == model)
    if not measured:
        return None
    below = [point for point in measured if point[0] <= batch]
    above = [point for point in measured if point[0] >= batch]
    if not below or not above:
        return (below or above)[-1 if below else 0][1]
    (b0, t0), (b1, t1) = below[-1], above[0]
    if b0 == b1:
        return t0
    share = (math.log(batch) - math.log(b0)) / (math.log(b1) - math.log(b0))
    return math.exp(math.log(t0) + share * (math.log(t1) - math.log(t0)))


def _muri(path: Path, rng: random.Random, site: Site) -> Scenario:
    jobs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            workload = Workload(row["model_name"], int(row["batch_size"]))
            duration_s = float(row["duration"]) / 1000.0
            arrival_s = float(row["submit_time"]) / 1000.0
            key = f"muri-{int(row['job_id']):05d}"
            width, priority = int(row["num_gpu"]), int(row.get("priority") or 0)
            max_slowdown = draw_max_slowdown(rng)
            steps = float(row["iterations"])
            jobs.append(_job(key, workload, width, arrival_s, duration_s, max_slowdown, priority, steps))
    notes = ("Muri times read as milliseconds", "Muri priority as given, higher first")
    return _scenario(path.stem, jobs, site, notes)


def _alibaba(path: Path, table: TruthTable, rng: random.Random, site: Site) -> Scenario:
    # Configurations the truth measured on the GPU, else V100's model names (the durations are the trace's)
    configs = table.configs(site.gpu) or table.configs(DEFAULT_GPU)
    jobs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            whole, share = int(row["num_gpu"]), int(row["gpu_milli"])
            if whole == 0 and share == 0:
                continue
            created, deleted = float(row["creation_time"]), float(row["deletion_time"])
            model, batch = rng.choice(configs)
            workload, max_slowdown = Workload(model, batch), draw_max_slowdown(rng)
            jobs.append(_job(row["name"], workload, max(whole, 1), created, deleted - created, max_slowdown))
    return _scenario(
        path.stem,
        [job for job in jobs if job.total_steps > 0],
        site,
        (
            "Alibaba pods get random configurations the truth measured (no model names in the trace)",
            "times in seconds",
            "Alibaba pods all priority 0 (the trace has QoS classes, no priority)",
        ),
    )


def _plain(path: Path, rng: random.Random, site: Site) -> Scenario:
    jobs = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        missing = [column for column in PLAIN_COLUMNS if column not in fields]
        if missing:
            raise ValueError(f"{path}: header lacks column(s) {', '.join(missing)}")
        for row in reader:
            jobs.append(_plain_job(_PlainRow(path, reader.line_num, row), rng))
    notes = ("plain CSV: seconds as given; maxSlowdown drawn from the horus-2500 mix where a row has none",)
    return _scenario(path.stem, jobs, site, notes)


def _plain_job(row: _PlainRow, rng: random.Random) -> SimJob:
    key = row.text("job_id")
    gpus, duration_s = row.number("gpus", int, least=1), row.number("duration_s", float, least=0.0)
    workload = Workload(row.text("model"), row.number("batch_size", int, least=1))
    max_slowdown = row.number("max_slowdown", float, least=1.0) if row.has("max_slowdown") else None
    priority = row.number("priority", int) if row.has("priority") else 0
    slowdown = draw_max_slowdown(rng) if max_slowdown is None else max_slowdown
    return _job(key, workload, gpus, row.number("submit_s", float), duration_s, slowdown, priority)


@dataclass(frozen=True)
class _PlainRow:
    """One row of a plain CSV, read with errors that name the file, line and column."""

    path: Path
    line: int
    values: dict[str, str | None]

    def has(self, column: str) -> bool:
        return bool((self.values.get(column) or "").strip())

    def text(self, column: str) -> str:
        if not self.has(column):
            raise self._error(column, "is empty")
        return str(self.values[column]).strip()

    def number(self, column: str, kind: type[N], least: float | None = None) -> N:
        text = self.text(column)
        try:
            value = kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise self._error(column, f"{text!r} is not {what}") from None
        if not math.isfinite(value) or (least is not None and value < least):
            raise self._error(column, f"{text!r} is not a finite number of at least {least}")
        return value

    def _error(self, column: str, problem: str) -> ValueError:
        return ValueError(f"{self.path}: line {self.line}, column {column}: {problem}")
