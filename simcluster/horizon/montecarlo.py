"""Monte Carlo over replicas, and the checkpoint-interval sweep with common random numbers.

Replica ``r`` of root seed ``s`` always sees the same sample path (failures, stragglers, planned
events, repairs), whatever the checkpoint policy: every interval of the sweep is evaluated on the
same paths, so differences between intervals are not sampling noise. Replicas can run in worker
processes (``jobs``); results do not depend on ``jobs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from simcluster.errors import SpecError, check_choice
from simcluster.horizon.bounds import check_bounds, mean_recovery_s
from simcluster.horizon.config import HorizonConfig, horizon_config
from simcluster.horizon.engine import run_simpy
from simcluster.horizon.fast import run_fast
from simcluster.horizon.machine import JobMachine
from simcluster.horizon.records import (
    ReliabilityResult,
    ReplicaRecord,
    SweepPoint,
    SweepResult,
    parabola_vertex,
)
from simcluster.horizon.sampling import SamplePath
from simcluster.perf.reliability import daly_expected_wall_s, daly_interval_s, young_interval_s
from simcluster.perf.step import estimate_step
from simcluster.spec.scenario import Scenario

ENGINES: dict[str, Callable[[JobMachine, SamplePath], ReplicaRecord]] = {
    "fast": run_fast, "simpy": run_simpy}


def run_replica(cfg: HorizonConfig, seed: int, replica: int, engine: str = "fast") -> ReplicaRecord:
    """One replica of ``cfg`` on the sample path ``(seed, replica)``."""
    check_choice("engine", engine, ENGINES)
    return ENGINES[engine](JobMachine(cfg), SamplePath(cfg, seed, replica))


def _run_range(cfg: HorizonConfig, seed: int, first: int, last: int, engine: str
               ) -> list[ReplicaRecord]:
    return [run_replica(cfg, seed, r, engine) for r in range(first, last)]


def run_replicas(cfg: HorizonConfig, replicas: int, seed: int, engine: str = "fast",
                 jobs: int = 1) -> tuple[ReplicaRecord, ...]:
    """Records of replicas ``0 .. replicas-1``, in order, over ``jobs`` worker processes."""
    check_choice("engine", engine, ENGINES)
    if jobs <= 1 or replicas < 2 * jobs:
        return tuple(_run_range(cfg, seed, 0, replicas, engine))
    bounds = [replicas * k // jobs for k in range(jobs + 1)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        parts = pool.map(_run_range, [cfg] * jobs, [seed] * jobs, bounds[:-1], bounds[1:],
                         [engine] * jobs)
        return tuple(record for part in parts for record in part)


def closed_form_intervals_s(cfg: HorizonConfig) -> tuple[float, float]:
    """Young's and Daly's optimum intervals for the blocking checkpoint cost and the job MTBF."""
    rate = cfg.failure_rate_s
    delta = cfg.checkpoint.blocking_s
    if rate <= 0.0 or delta <= 0.0:
        return math.inf, math.inf
    return young_interval_s(delta, 1.0 / rate), daly_interval_s(delta, 1.0 / rate)


def daly_goodput(cfg: HorizonConfig) -> float:
    """Closed-form goodput ``T_s / E[T_wall]`` (Daly Eq. 9 per unit work) for ``cfg``."""
    rate = cfg.failure_rate_s
    tau, delta = cfg.checkpoint.interval_s, cfg.checkpoint.blocking_s
    if rate <= 0.0:
        return tau / (tau + delta)
    return 1.0 / daly_expected_wall_s(1.0, tau, delta, mean_recovery_s(cfg), 1.0 / rate)


def simulate_config(cfg: HorizonConfig, replicas: int = 100, seed: int = 0, engine: str = "fast",
                    jobs: int = 1, *, step_engine: str = "given") -> ReliabilityResult:
    """Monte Carlo of ``cfg`` over ``replicas`` replicas (refused up front when unbounded:
    :func:`simcluster.horizon.bounds.check_bounds`). ``step_engine`` labels ``cfg.step_s``."""
    check_bounds((cfg,), replicas, engine)
    young, daly = closed_form_intervals_s(cfg)
    return ReliabilityResult(
        records=run_replicas(cfg, replicas, seed, engine, jobs), class_names=cfg.class_names,
        work_s=cfg.work_s, interval_s=cfg.checkpoint.interval_s, engine=engine,
        young_interval_s=young, daly_interval_s=daly, checkpoint_bytes=cfg.checkpoint.size_bytes,
        checkpoint_blocking_s=cfg.checkpoint.blocking_s, step_time_s=cfg.step_s,
        step_engine=step_engine, straggler_slowdown=(
            cfg.stragglers.slowdown if cfg.stragglers.rate_per_node_s > 0 else None))


def step_and_engine(scenario: Scenario, step_time_s: float | None, step_engine: str | None
                    ) -> tuple[float, str]:
    """The nominal step time and the name of the engine that gave it.

    Without ``step_time_s``: the analytical estimate (``analytical``; it slows the slow GPUs'
    stages, but link degradations need ``run.single.engine_step``, so they are rejected here);
    with it: ``step_engine`` (``given`` when not named).
    """
    if step_time_s is None:
        if scenario.perturbations.link_bandwidth:
            raise SpecError("perturbations.link_bandwidth", "a degraded link needs the step from "
                            "run.single.engine_step: pass it as step_time_s")
        return estimate_step(scenario).iteration_time_s, "analytical"
    return step_time_s, step_engine or "given"


def simulate_reliability(scenario: Scenario, replicas: int = 100, seed: int | None = None,
                         step_time_s: float | None = None, *, engine: str = "fast",
                         jobs: int = 1, step_engine: str | None = None) -> ReliabilityResult:
    """Simulate the whole training run of ``scenario`` with failures and checkpoints.

    Parameters
    ----------
    scenario : Scenario
        Needs ``training.tokens`` or ``reliability.horizon_days``.
    replicas : int
        Monte Carlo replicas.
    seed : int, optional
        Root seed (default: ``scenario.seed``).
    step_time_s : float, optional
        Nominal step time (s), e.g. from the DES; default: the analytical estimate.
    engine : str
        The event loop: ``fast`` (plain loop) or ``simpy``; they give identical records.
    jobs : int
        Worker processes.
    step_engine : str, optional
        Which engine gave ``step_time_s`` (``des``, ``analytical``), reported as ``step_engine``.
    """
    step_s, step_name = step_and_engine(scenario, step_time_s, step_engine)
    cfg = horizon_config(scenario, step_s)
    return simulate_config(cfg, replicas, scenario.seed if seed is None else seed, engine, jobs,
                           step_engine=step_name)


def sweep_configs(configs: Sequence[HorizonConfig], replicas: int, seed: int, engine: str = "fast",
                  jobs: int = 1) -> SweepResult:
    """Goodput of each configuration (same failures, different intervals) on the same paths.

    All configurations are checked against the limits before any runs; an optimum on an edge of
    the grid comes with a warning.
    """
    check_bounds(tuple(configs), replicas, engine)
    points = tuple(sweep_point(cfg, replicas, seed, engine, jobs) for cfg in configs)
    young, daly = closed_form_intervals_s(configs[0])
    return SweepResult(points=points, optimal_interval_min=simulated_optimum_min(points),
                       young_interval_min=young / 60.0, daly_interval_min=daly / 60.0,
                       replicas=replicas, warnings=edge_warnings(points, young / 60.0, daly / 60.0))


def sweep_point(cfg: HorizonConfig, replicas: int, seed: int, engine: str = "fast", jobs: int = 1
                ) -> SweepPoint:
    """Mean goodput, its 95% CI and mean time to train of ``cfg`` on the paths of ``seed``."""
    result = simulate_config(cfg, replicas, seed, engine, jobs)
    ttt = result.to_dict()["time_to_train_days"]
    return SweepPoint(interval_min=cfg.checkpoint.interval_s / 60.0, goodput=result.goodput,
                      ci95=result.goodput_ci95,
                      time_to_train_days=None if ttt is None else ttt["mean"],
                      daly_goodput=daly_goodput(cfg))


def edge_warnings(points: Sequence[SweepPoint], young_min: float, daly_min: float
                  ) -> tuple[str, ...]:
    """A warning when the best grid point is the first or the last of a grid of two or more."""
    best = max(range(len(points)), key=lambda i: points[i].goodput)
    if len(points) < 2 or 0 < best < len(points) - 1:
        return ()
    edge = "lower" if best == 0 else "upper"
    return (f"the best interval of the sweep ({points[best].interval_min:.4g} min) is on the {edge} "
            f"edge of the grid {points[0].interval_min:.4g}..{points[-1].interval_min:.4g} min: the "
            f"optimum may lie beyond it (Young {young_min:.4g} min, Daly {daly_min:.4g} min); widen "
            f"the grid or use --optimize-interval",)


def simulated_optimum_min(points: Sequence[SweepPoint]) -> float:
    """Interval of highest mean goodput, refined by a parabola through its grid neighbours."""
    best = max(range(len(points)), key=lambda i: points[i].goodput)
    if 0 < best < len(points) - 1:
        near = points[best - 1:best + 2]
        return parabola_vertex((near[0].interval_min, near[1].interval_min, near[2].interval_min),
                               (near[0].goodput, near[1].goodput, near[2].goodput))
    return points[best].interval_min


def interval_sweep(scenario: Scenario, intervals_s: Sequence[float], replicas: int = 100,
                   seed: int | None = None, step_time_s: float | None = None, *,
                   engine: str = "fast", jobs: int = 1) -> SweepResult:
    """Goodput against the checkpoint interval, with the simulated optimum, Young's and Daly's.

    Every interval runs on the same sample paths (common random numbers).
    """
    step, _ = step_and_engine(scenario, step_time_s, None)
    configs = [horizon_config(scenario, step, interval_s=i) for i in intervals_s]
    return sweep_configs(configs, replicas, scenario.seed if seed is None else seed, engine, jobs)
