"""The estimators the online correction keeps (`correction.py` says what each level learns and why):
a running mean (`Evidence`), the largest memory seen (`Peak`), a job or pair level's mean log prior and
log observed slowdown (`Residuals`), a GPU level's least-squares scale (`Scale`), and how strongly the
prior is trusted (`strength_of`). Pure arithmetic on numbers: no workloads, no persistence."""

from __future__ import annotations

import dataclasses
import math

NOISE_SD = 0.1  # σ: one observed slowdown's error, in log space
SCALE_SD = 0.5  # τ_b before evidence: the GPU-level scale's prior N(1, τ_b²)
SCALE_PSEUDO_SXX = 1.0  # Σx² that SCALE_SD is worth (about 6 samples the prior put at 1.5×)
PRIOR_STRENGTH = 2.0  # k = σ²/τ² before any residual is seen: the prior counts as this many samples
SPREAD_PSEUDO_SAMPLES = 10  # how many residuals that initial k is worth
STRENGTH_RANGE = (0.1, 20.0)  # k stays within: never all trust in one sample, never none
MAX_WEIGHT = 50  # samples; beyond it older evidence fades
# Readings of jobs alone on a GPU type before the floor they bound replaces the table's default: one
# reading taken early (a model still loading) or of a job whose least memory is over-stated is not
# enough to move every prediction of that GPU type.
FLOOR_MIN_SAMPLES = 3


@dataclasses.dataclass
class Evidence:
    samples: int = 0
    mean: float = 0.0  # mean log residual, weighting the newest `max_weight` samples

    def add(self, residual: float, max_weight: int) -> None:
        self.samples += 1
        self.mean += (residual - self.mean) / min(self.samples, max_weight)

    def shrunk(self, toward: float, strength: float, max_weight: int) -> float:
        weight = min(self.samples, max_weight)
        return (weight * self.mean + strength * toward) / (weight + strength)


@dataclasses.dataclass
class Peak:
    """The largest GPU memory (MiB) a job signature was seen holding alone, over `samples` readings."""

    samples: int = 0
    mib: float = 0.0

    def add(self, mib: float) -> None:
        self.samples += 1
        self.mib = max(self.mib, mib)


@dataclasses.dataclass
class Residuals:
    """A job or pair level: the mean x (ln prior) and y (ln observed) of its samples, newest-weighted."""

    samples: int = 0
    x: float = 0.0
    y: float = 0.0

    def add(self, x: float, y: float, max_weight: int) -> None:
        self.samples += 1
        weight = min(self.samples, max_weight)
        self.x += (x - self.x) / weight
        self.y += (y - self.y) / weight

    def shrunk(self, scale: float, toward: float, strength: float, max_weight: int) -> float:
        """Posterior mean residual against the prior scaled by `scale`."""
        weight = min(self.samples, max_weight)
        return (weight * (self.y - scale * self.x) + strength * toward) / (weight + strength)


@dataclasses.dataclass
class Scale:
    """A GPU level: mean x² and xy of its samples (least squares through the origin), newest-weighted."""

    samples: int = 0
    xx: float = 0.0
    xy: float = 0.0

    def add(self, x: float, y: float, max_weight: int) -> None:
        self.samples += 1
        weight = min(self.samples, max_weight)
        self.xx += (x * x - self.xx) / weight
        self.xy += (x * y - self.xy) / weight

    def posterior(self, scatter: float, max_weight: int) -> tuple[float, float]:
        """Mean and variance of the scale b under its prior N(1, τ_b²), τ_b estimated (module docstring);
        `scatter`: one sample's variance about the scaled prior."""
        sxx = min(self.samples, max_weight) * self.xx
        if sxx <= 0:
            return 1.0, SCALE_SD**2
        shown = max(0.0, (self.xy / self.xx - 1) ** 2 - scatter / sxx)  # (b̂ − 1)² less its noise
        prior_variance = (SCALE_PSEUDO_SXX * SCALE_SD**2 + sxx * shown) / (SCALE_PSEUDO_SXX + sxx)
        pull = scatter / prior_variance  # λ: how much Σx² the prior is worth
        # never above 1: a GPU-wide stretch would stop every co-location, and with them the evidence
        # that could undo it (module docstring, "Only downward")
        return min(1.0, (sxx * self.xy / self.xx + pull) / (sxx + pull)), scatter / (sxx + pull)


def initial_mean_square() -> float:
    """σ² + τ₀², with τ₀² = σ²/PRIOR_STRENGTH."""
    return NOISE_SD**2 * (1 + 1 / PRIOR_STRENGTH)


def strength_of(mean_square: float) -> float:
    """k = σ²/τ², τ² being the residuals' mean square less the noise σ², within STRENGTH_RANGE."""
    low, high = STRENGTH_RANGE
    prior_variance = max(mean_square - NOISE_SD**2, NOISE_SD**2 / high)
    return min(high, max(low, NOISE_SD**2 / prior_variance))


def log_excess(slowdown: float) -> float:
    """ln of a slowdown floored at 1: how much slower than alone, in log space."""
    return math.log(max(1.0, slowdown))


@dataclasses.dataclass
class RuntimeFloor:
    """What a runtime's process holds on a GPU type before its model counts, bounded from above by jobs
    seen alone: each reading less the least its own model could hold is at least the floor, so the
    least of them over `samples` readings (`mib`) is the tightest bound seen."""

    samples: int = 0
    mib: float = math.inf

    def add(self, bound_mib: float) -> None:
        self.samples += 1
        self.mib = min(self.mib, bound_mib)
