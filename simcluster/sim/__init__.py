"""The iteration engine: one training step simulated as discrete events (SimPy).

Devices have a compute stream and communication streams; links are shared by concurrent
transfers; the step is a plan of ops per pipeline stage generated from ``perf/`` durations under
an explicit schedule (GPipe, 1F1B, interleaved 1F1B, ZB-H1). Congruent DP replicas are simulated
once with a multiplicity; a straggler or a degraded link gets its own replica class.

Entry points: :func:`simulate_step` and :func:`write_trace`.
"""

from simcluster.sim.perturb import GpuSlowdown, LinkDegradation, Perturbations
from simcluster.sim.result import DesResult, Extrapolation
from simcluster.sim.step import run, simulate_step, write_trace

__all__ = ["DesResult", "Extrapolation", "GpuSlowdown", "LinkDegradation", "Perturbations", "run",
           "simulate_step", "write_trace"]
