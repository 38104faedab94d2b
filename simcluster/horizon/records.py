"""Result records: one flat record per replica, and the Monte Carlo summary over replicas.

Metric definitions (docs/reliability.md; ETT as defined in the Llama 3 paper, arXiv 2407.21783
s3.3.4: useful training time over elapsed time):

- goodput: useful work (nominal step time x steps kept) / elapsed;
- effective training time ratio (Llama 3's ETT): time spent training, slow or not, on work that was
  kept / elapsed = goodput + (straggling + reduced_replicas) / elapsed;
- lost-time breakdown: elapsed - useful, by bucket; the buckets sum to it exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Lost-time buckets, in ledger order.
BUCKETS = ("checkpoint_blocking", "rework", "detection", "diagnosis", "waiting_for_nodes", "restart",
           "load", "warmup", "maintenance", "straggling", "reduced_replicas")
#: Buckets in which the job still trains (slowly): counted as training time by ETT.
TRAINING_BUCKETS = ("straggling", "reduced_replicas")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaRecord:
    """One replica: elapsed and useful time (s), lost time per bucket, interruptions per class."""

    elapsed_s: float
    useful_s: float
    lost_s: tuple[float, ...]
    interruptions: tuple[int, ...]
    completed: bool
    spare_exhaustions: int = 0
    restarts: int = 0

    @property
    def goodput(self) -> float:
        """Useful over elapsed (1 for an empty run)."""
        return self.useful_s / self.elapsed_s if self.elapsed_s > 0 else 1.0


def finite_or_none(value: float) -> float | None:
    """``value``, or ``None`` when it is infinite or NaN (JSON has no infinity)."""
    return value if math.isfinite(value) else None


def _ci95(values: np.ndarray) -> float:
    """Half-width of the normal 95% confidence interval of the mean."""
    if values.size < 2:
        return 0.0
    return float(1.96 * values.std(ddof=1) / math.sqrt(values.size))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReliabilityResult:
    """Monte Carlo summary of a reliability simulation (output fields: docs/reliability.md, "Outputs").

    ``records`` are kept for analysis; ``to_dict`` gives the JSON fields. ``work_s`` is the useful
    work of the whole run; when a horizon cuts the replicas short, time to train is extrapolated
    as ``work_s / goodput``.
    """

    records: tuple[ReplicaRecord, ...]
    class_names: tuple[str, ...]
    work_s: float
    interval_s: float
    engine: str
    young_interval_s: float
    daly_interval_s: float
    checkpoint_bytes: float
    checkpoint_blocking_s: float = math.nan
    step_time_s: float = math.nan
    step_engine: str = "given"
    straggler_slowdown: float | None = None  # step-time multiplier of an episode (None: none)

    def column(self, name: str) -> np.ndarray:
        """One per-replica quantity as an array (``goodput``, ``elapsed_s``, ``useful_s``...)."""
        return np.array([getattr(r, name) for r in self.records], dtype=float)

    @property
    def goodput(self) -> float:
        """Mean goodput over replicas."""
        return float(self.column("goodput").mean())

    @property
    def goodput_ci95(self) -> float:
        """Half-width of the 95% confidence interval of the mean goodput."""
        return _ci95(self.column("goodput"))

    def lost_mean_s(self) -> dict[str, float]:
        """Mean lost time per bucket (s)."""
        lost = np.array([r.lost_s for r in self.records]).mean(axis=0)
        return {name: float(v) for name, v in zip(BUCKETS, lost, strict=True)}

    def interruptions_mean(self) -> dict[str, float]:
        """Mean interruptions per class (failure classes, ``straggler``, ``planned``)."""
        counts = np.array([r.interruptions for r in self.records], dtype=float).mean(axis=0)
        return {name: float(v) for name, v in zip(self.class_names, counts, strict=True)}

    def time_to_train_s(self) -> np.ndarray:
        """Per replica: elapsed if the run completed, else ``work_s / goodput`` (extrapolated)."""
        return np.array([r.elapsed_s if r.completed else
                         (self.work_s / r.goodput if r.goodput > 0 else math.inf)
                         for r in self.records])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: interruptions, goodput, ETT, time to train, lost-time breakdown."""
        elapsed = self.column("elapsed_s")
        useful = self.column("useful_s")
        lost = self.lost_mean_s()
        training = sum(lost[b] for b in TRAINING_BUCKETS)
        by_class = self.interruptions_mean()
        unexpected = sum(v for k, v in by_class.items() if k != "planned")
        ttt = self.time_to_train_s() / 86400.0
        finite = math.isfinite(self.work_s)
        return {
            "engine": self.engine, "loop": self.engine, "step_engine": self.step_engine,
            "step_time_s": finite_or_none(self.step_time_s), "replicas": len(self.records),
            "interruptions": {"total": sum(by_class.values()), "unexpected": unexpected,
                              "by_class": by_class},
            "goodput": self.goodput, "goodput_ci95": self.goodput_ci95,
            "effective_training_time_ratio": float(((useful + training) / elapsed).mean()),
            "time_to_train_days": ({"mean": float(ttt.mean()), **percentiles(ttt)}
                                   if finite else None),
            "time_to_train_histogram": histogram(ttt) if finite else None,
            "goodput_percentiles": percentiles(self.column("goodput")),
            "elapsed_days": float(elapsed.mean() / 86400.0),
            "useful_days": float(useful.mean() / 86400.0),
            "completed_fraction": float(np.mean([r.completed for r in self.records])),
            "lost_time_breakdown_h": {k: v / 3600.0 for k, v in lost.items()},
            "lost_time_total_h": float((elapsed - useful).mean() / 3600.0),
            "spare_exhaustions": float(np.mean([r.spare_exhaustions for r in self.records])),
            "checkpoint_interval_min": finite_or_none(self.interval_s / 60.0),
            "checkpoint_size_tb": self.checkpoint_bytes / 1e12,
            "checkpoint_blocking_s": finite_or_none(self.checkpoint_blocking_s),
            "young_interval_min": finite_or_none(self.young_interval_s / 60.0),
            "daly_interval_min": finite_or_none(self.daly_interval_s / 60.0),
            "straggler_slowdown": self.straggler_slowdown,
        }


#: The spread a planner reads: the 5th, 50th, 95th and 99th percentiles over replicas.
PERCENTILES = (5, 25, 50, 75, 95, 99)
HISTOGRAM_BINS = 20


def percentiles(values: np.ndarray) -> dict[str, float]:
    """``{"p5": ..., "p25": ..., "p50": ..., "p75": ..., "p95": ..., "p99": ...}`` over replicas
    (linear interpolation, numpy's default; infinite values, runs that never finish, sort last)."""
    return {f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}


def histogram(values: np.ndarray) -> dict[str, list[float]] | None:
    """``HISTOGRAM_BINS`` equal bins over the finite values: ``edges_days`` (bins + 1) and
    ``counts`` (replicas per bin; they sum to the finite replicas). None when no value is finite."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    low, high = float(finite.min()), float(finite.max())
    narrowest = max(abs(low) * 1e-6, 1e-9)  # equal values, or a spread numpy cannot split in bins
    if high - low < narrowest:
        high = low + narrowest
    counts, edges = np.histogram(finite, bins=HISTOGRAM_BINS, range=(low, high))
    return {"edges_days": [float(e) for e in edges], "counts": [float(c) for c in counts]}


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPoint:
    """One interval of the sweep: mean goodput and its 95% CI, mean time to train (days).

    ``daly_goodput`` is the closed form ``T_s / E[T_wall]`` of Daly's Eq. 9 with the blocking
    checkpoint cost and the mean recovery time (detect to resumed progress, waits excluded).
    """

    interval_min: float
    goodput: float
    ci95: float
    time_to_train_days: float | None
    daly_goodput: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """Goodput against the checkpoint interval, with the simulated optimum and the closed forms.

    ``optimal_interval_min`` is the grid point of highest mean goodput, refined by the vertex of the
    parabola through it and its neighbours (when it is inside the grid). ``warnings``: e.g. the
    optimum lies on an edge of the grid, so the true optimum may lie beyond it.
    """

    points: tuple[SweepPoint, ...]
    optimal_interval_min: float
    young_interval_min: float
    daly_interval_min: float
    replicas: int
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the sweep points and the three optima."""
        return {"interval_sweep": [{"interval_min": p.interval_min, "goodput": p.goodput,
                                    "ci95": p.ci95, "time_to_train_days": p.time_to_train_days,
                                    "daly_goodput": p.daly_goodput}
                                   for p in self.points],
                "optimal_interval_min": self.optimal_interval_min,
                "young_interval_min": finite_or_none(self.young_interval_min),
                "daly_interval_min": finite_or_none(self.daly_interval_min),
                "sweep_replicas": self.replicas, "warnings": list(self.warnings)}


@dataclass(frozen=True, slots=True, kw_only=True)
class OptimumResult:
    """The checkpoint interval of highest simulated goodput, found by golden-section search.

    ``points`` are the evaluated intervals in evaluation order (common random numbers: every one on
    the same sample paths); ``bracket_min`` the search interval (Young/4 .. 4 x Daly).
    """

    points: tuple[SweepPoint, ...]
    optimal_interval_min: float
    optimal_goodput: float
    young_interval_min: float
    daly_interval_min: float
    bracket_min: tuple[float, float]
    replicas: int
    warnings: tuple[str, ...] = ()

    def interval_range_min(self) -> tuple[float, float]:
        """The evaluated intervals as good as the optimum within its 95% confidence interval
        (mean goodput >= optimum - its half-width): (shortest, longest), in minutes."""
        best = max(self.points, key=lambda p: p.goodput)
        close = [p.interval_min for p in self.points if p.goodput >= best.goodput - best.ci95]
        return min(close), max(close)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the optimum, the closed forms, the evaluations."""
        return {"optimal_interval_min": self.optimal_interval_min,
                "optimal_interval_ci95_min": list(self.interval_range_min()),
                "optimal_goodput": self.optimal_goodput,
                "young_interval_min": finite_or_none(self.young_interval_min),
                "daly_interval_min": finite_or_none(self.daly_interval_min),
                "search_bracket_min": list(self.bracket_min),
                "evaluations": len(self.points),
                "interval_search": [{"interval_min": p.interval_min, "goodput": p.goodput,
                                     "ci95": p.ci95, "time_to_train_days": p.time_to_train_days,
                                     "daly_goodput": p.daly_goodput} for p in self.points],
                "sweep_replicas": self.replicas, "warnings": list(self.warnings)}


def parabola_vertex(x: tuple[float, float, float], y: tuple[float, float, float]) -> float:
    """Abscissa of the vertex of the parabola through three points (the middle x if degenerate)."""
    (x0, x1, x2), (y0, y1, y2) = x, y
    denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / denom
    b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / denom
    if a >= 0.0:
        return x1
    return min(max(-b / (2.0 * a), x0), x2)
