"""Small truth tables and scenarios for simulator tests."""

from __future__ import annotations

from pathlib import Path

from horus_operator.placement.cycle import SchedulingCycle
from horus_operator.placement.fake import TablePredictor
from horus_operator.placement.registry import make_policy
from horus_operator.placement.types import JobRequest
from horus_operator.prediction.api import Workload
from horus_operator.prediction.measured import TruthTable
from horus_operator.sim.truth import Truth
from horus_operator.sim.workloads import Scenario, SimJob, cluster

HEADER = "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared\n"
# alone: a 10 steps/s, b 4 steps/s, c 2 steps/s. Measured pairs: a+b (a 1.25x, b 1.6x), a+a, b+b;
# a+c cannot share (both shared 0); b+c is unmeasured.
ROWS = "v100,a,1,b,1,10,4,8,2.5\nv100,a,1,a,1,10,10,5,5\nv100,b,1,b,1,4,4,2,2\nv100,a,1,c,1,10,2,0,0\n"


def truth_table(tmp_path: Path) -> TruthTable:
    path = tmp_path / "truth.csv"
    path.write_text(HEADER + ROWS)
    return TruthTable.from_csv(path)


def predictor() -> TablePredictor:
    """What policies believe: close to the truth for a+b, optimistic about a+c, and b+c unmeasured."""
    return TablePredictor(
        jobs={"a": (0.4, 3000.0), "b": (0.5, 3000.0), "c": (0.5, 3000.0)},
        pairs={
            ("a", "b"): (1.2, 1.5),
            ("a", "a"): (2.0, 2.0),
            ("b", "b"): (2.0, 2.0),
            ("a", "c"): (1.1, 1.1),
            ("b", "c"): (1.3, 1.3),
        },
    )


def cycle(policy: str) -> SchedulingCycle:
    """The scheduling cycle of `policy`, deciding with `predictor()`."""
    believed = predictor()
    return SchedulingCycle(make_policy(policy, predictor=believed))


def truth(tmp_path: Path) -> Truth:
    return Truth(truth_table(tmp_path), fallback=predictor())


def sim_job(key: str, model: str, steps: float, alone: float, at: float, max_slowdown: float = 2.0) -> SimJob:
    request = JobRequest(key, Workload(model, 1), 1, max_slowdown, 0, at)
    return SimJob(request, steps, alone)


def scenario(jobs: list[SimJob], gpus: int = 1) -> Scenario:
    return Scenario("test", tuple(sorted(jobs, key=lambda j: j.arrival_s)), cluster(gpus), "v100")
