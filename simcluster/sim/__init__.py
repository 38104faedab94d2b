"""The iteration engine: one training step simulated as discrete events (SimPy).

Devices have a compute stream and communication streams; links are shared by concurrent
transfers; the step is a plan of ops per pipeline stage generated from ``perf/`` durations under
an explicit schedule (GPipe, 1F1B, interleaved 1F1B, ZB-H1). Congruent DP replicas are simulated
once with a multiplicity; a straggler or a degraded link gets its own replica class.

Entry points: :func:`simulate_step` and :func:`write_trace`. The names are exported lazily (PEP 562
module ``__getattr__``), so the closed-form engine can use the plan's duration helpers
(``simcluster.sim.durations``, ``simcluster.sim.perturb``) without importing SimPy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcluster.lazy import lazy_exports

if TYPE_CHECKING:
    from simcluster.sim.perturb import GpuSlowdown, LinkDegradation, Perturbations
    from simcluster.sim.result import DesResult, Extrapolation
    from simcluster.sim.step import run, simulate_step, write_trace

__all__ = ["DesResult", "Extrapolation", "GpuSlowdown", "LinkDegradation", "Perturbations", "run",
           "simulate_step", "write_trace"]

#: Exported name -> the module that defines it (imported on first access).
_EXPORTS = {
    "GpuSlowdown": "simcluster.sim.perturb", "LinkDegradation": "simcluster.sim.perturb",
    "Perturbations": "simcluster.sim.perturb", "DesResult": "simcluster.sim.result",
    "Extrapolation": "simcluster.sim.result", "run": "simcluster.sim.step",
    "simulate_step": "simcluster.sim.step", "write_trace": "simcluster.sim.step",
}


__getattr__, __dir__ = lazy_exports("simcluster.sim", globals(), _EXPORTS)
