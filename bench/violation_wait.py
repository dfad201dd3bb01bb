"""How long must an observed violation last before a job moves? Needless moves and reaction time of the
fixed wait against the one derived from the observation noise (issue 25, item 4).

    .venv/bin/python bench/violation_wait.py [--trials 4000] [--seed 1]

A model of the readings, not a measurement: a job shares a GPU for an hour with a true slowdown of
`ratio` × its maxSlowdown; after the agent's rate window has settled (`MoveSettings.settle_s`) a new
rate is read every `reading_every_s`, each off by log-normal noise of `noise_sd` (the same σ the online
correction assumes, `correction.NOISE_SD`); the planner looks every 10 s (the operator's resync period).
Two readings of "the observed slowdown": the latest reading alone, or the mean of the co-tenancy's
readings so far. Two rules: the fixed 300 s, and `MoveSettings.violation_wait_s`. For ratios ≤ 1 every
move is needless; above 1 the table gives the mean seconds from the co-tenancy's start to the move.
Prints one table (Markdown) and asserts nothing.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from horus_operator.placement.moves import MoveSettings

RATIOS = (0.90, 0.95, 1.00, 1.02, 1.05, 1.10, 1.30, 1.60)
HORIZON_S = 3600.0
LOOK_EVERY_S = 10.0
LIMIT = 2.0


def first_move_s(readings: np.ndarray, settings: MoveSettings, *, derived: bool, mean: bool) -> float:
    """When the planner first moves the job (inf: never within the horizon), from one trial's readings
    (log slowdowns, one per `reading_every_s` after settling)."""
    observed = np.cumsum(readings) / np.arange(1, len(readings) + 1) if mean else readings
    for look in np.arange(LOOK_EVERY_S, HORIZON_S + LOOK_EVERY_S / 2, LOOK_EVERY_S):
        read = int((look - settings.settle_s) // settings.reading_every_s)
        if read < 1:
            continue
        slowdown = math.exp(observed[min(read, len(observed)) - 1])
        wait = settings.violation_wait_s(slowdown, LIMIT) if derived else settings.over_limit_for_s
        if slowdown > LIMIT and look >= wait:
            return float(look)
    return math.inf


def row(ratio: float, rng: np.random.Generator, trials: int, settings: MoveSettings) -> list[str]:
    count = int((HORIZON_S - settings.settle_s) // settings.reading_every_s)
    cells = []
    for derived in (False, True):
        for mean in (False, True):
            readings = math.log(ratio * LIMIT) + rng.normal(0.0, settings.noise_sd, size=(trials, count))
            moves = np.array([first_move_s(r, settings, derived=derived, mean=mean) for r in readings])
            moved = np.isfinite(moves)
            if ratio <= 1.0:
                cells.append(f"{moved.mean():.1%} needless")
            else:
                reaction = moves[moved].mean() if moved.any() else math.inf
                cells.append(f"{reaction:.0f} s ({moved.mean():.0%})")
    return [f"{ratio:.2f}", *cells]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    settings, rng = MoveSettings(), np.random.default_rng(args.seed)
    header = ["true / limit", "fixed, latest", "fixed, mean", "derived, latest", "derived, mean"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for ratio in RATIOS:
        print("| " + " | ".join(row(ratio, rng, args.trials, settings)) + " |")


if __name__ == "__main__":
    main()
