"""The horizon engine: the whole training run at event granularity, with Monte Carlo over seeds.

Failures by class (per-node rates x node count; exponential or Weibull; failure domains), planned
maintenance, detection, diagnosis, spares and replacements, restart, checkpoint load, warm-up and
rework; synchronous, asynchronous two-phase and in-memory checkpoints; stragglers; elastic DP. See
docs/reliability.md. ``simulate_reliability`` and ``interval_sweep`` are the entry points.
"""

from simcluster.horizon.config import (
    CheckpointPlan,
    FailureClass,
    HorizonConfig,
    StragglerPlan,
    horizon_config,
)
from simcluster.horizon.montecarlo import (
    interval_sweep,
    run_replica,
    run_replicas,
    simulate_config,
    simulate_reliability,
    sweep_configs,
)
from simcluster.horizon.records import BUCKETS, ReliabilityResult, ReplicaRecord, SweepPoint, SweepResult

__all__ = [
    "BUCKETS",
    "CheckpointPlan",
    "FailureClass",
    "HorizonConfig",
    "ReliabilityResult",
    "ReplicaRecord",
    "StragglerPlan",
    "SweepPoint",
    "SweepResult",
    "horizon_config",
    "interval_sweep",
    "run_replica",
    "run_replicas",
    "simulate_config",
    "simulate_reliability",
    "sweep_configs",
]
