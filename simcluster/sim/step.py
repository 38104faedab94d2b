"""The discrete-event step: ``simulate_step(scenario) -> DesResult``, the engine behind
``simcluster run`` (the analytical :func:`simcluster.perf.step.estimate_step` stays the fast path
and the oracle).

build (plan from ``perf/`` durations, schedules and replica classes) -> wire and run
(:mod:`.cluster`) -> collect (:mod:`.collect`) -> optional trace.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simcluster.errors import InvariantError, SpecError
from simcluster.observe.ledger import CATEGORIES, Ledger
from simcluster.observe.tracer import ChromeTracer, Tracer
from simcluster.perf.flops import hardware_flops_per_iteration, model_flops_per_iteration
from simcluster.perf.step import TimeBreakdown
from simcluster.sim.build import build_plan
from simcluster.sim.cluster import run_plan
from simcluster.sim.collect import collect
from simcluster.sim.periodic import (
    EXTRAPOLATE_ABOVE_OPS,
    FULL_LIMIT_OPS,
    extrapolate,
    op_count,
    refuse,
)
from simcluster.sim.perturb import Perturbations, perturbations_of
from simcluster.sim.plan import StepPlan
from simcluster.sim.result import DesResult
from simcluster.sim.trace import chrome_trace, emit, write_trace_file
from simcluster.spec.scenario import Scenario


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector (a simulation makes no garbage cycles worth finding,
    and the collector's passes grow with the live records); restore the caller's state."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(plan: StepPlan, model_flops: float = 0.0, hardware_flops: float = 0.0,
        tracer: Tracer | None = None) -> DesResult:
    """Simulate a ready-made plan (tests build plans by hand)."""
    with no_cyclic_gc():
        out = run_plan(plan)
        got = collect(out, plan)
    _check_conserved(got.ledger, out.end_s)
    seconds = got.ledger.as_dict()
    breakdown = TimeBreakdown(**{c: seconds[c] for c in CATEGORIES})
    if tracer is not None:
        emit(out.records, plan, tracer)
    return DesResult(iteration_time_s=breakdown.total_s, breakdown=breakdown,
                     model_flops=model_flops, hardware_flops=hardware_flops,
                     dp_total_s=got.dp_total_s, dp_hidden_s=got.dp_hidden_s,
                     critical_group=got.critical_group, critical_stage=got.critical_stage,
                     critical_path=got.critical_path, records=out.records, plan=plan)


#: Relative tolerance of the ledger's conservation check (float sums of ~1e5 spans: ~1e-14 seen).
CONSERVATION_RTOL = 1e-9


def _check_conserved(ledger: Ledger, end_s: float) -> None:
    """The critical stage's categories must add up to the step's end (``Ledger.gap_s``): the
    breakdown is the iteration time only because nothing on the timeline went unbooked."""
    gap = ledger.gap_s(end_s)
    if abs(gap) > CONSERVATION_RTOL * max(end_s, 1.0):
        raise InvariantError(f"the ledger books {ledger.total_s} s of a {end_s} s step "
                             f"(gap {gap} s): a span was booked twice or not at all")


def simulate_step(scenario: Scenario, tracer: Tracer | None = None,
                  perturbations: Perturbations | None = None,
                  extrapolate_above: int | None = EXTRAPOLATE_ABOVE_OPS) -> DesResult:
    """Simulate one training step of ``scenario`` as discrete events.

    Parameters
    ----------
    scenario : Scenario
        A resolved scenario.
    tracer : Tracer, optional
        Receives the step's spans (e.g. :class:`~simcluster.observe.tracer.ChromeTracer`); a
        step extrapolated from its steady state has no full event log and refuses one.
    perturbations : Perturbations, optional
        Slow GPUs and degraded links; default: the scenario's ``perturbations`` section, if any.
    extrapolate_above : int, optional
        Plans of more ops than this are extrapolated from a periodic steady state
        (:mod:`.periodic`); None simulates every op (unbounded: benchmarks and tests).

    Returns
    -------
    DesResult
        Step time, breakdown, critical path, DP overlap, FLOPs and the event log.

    Raises
    ------
    SpecError
        A step of more than :data:`~.periodic.FULL_LIMIT_OPS` ops that reaches no steady state.
    """
    pert = perturbations if perturbations is not None else perturbations_of(scenario)
    par = scenario.parallelism
    flops = (model_flops_per_iteration(scenario.model, par.global_batch),
             hardware_flops_per_iteration(scenario.model, par.global_batch, par.recompute))
    ops = op_count(scenario, pert)
    if extrapolate_above is not None and ops > extrapolate_above:
        if tracer is not None:
            raise SpecError("--trace", f"a trace needs the full event log, kept up to "
                            f"{extrapolate_above} simulated ops; this step has {ops} "
                            "(parallelism.global_batch / micro_batch): lower the global batch")

        def full(s: Scenario) -> DesResult:
            return run(build_plan(s, pert))

        found = extrapolate(scenario, pert, full)
        if found is not None:
            return dataclasses.replace(found, model_flops=flops[0], hardware_flops=flops[1])
        if ops > FULL_LIMIT_OPS:
            raise refuse(scenario, ops)
    return run(build_plan(scenario, pert), *flops, tracer)


def write_trace(source: DesResult | ChromeTracer, path: str | Path) -> Path:
    """Write a Chrome/Perfetto JSON trace of a result (or of a filled tracer), atomically."""
    if isinstance(source, DesResult) and source.extrapolation is not None:
        x = source.extrapolation
        raise SpecError("--trace", f"the step of {x.micro_batches} micro-batches was extrapolated "
                        f"from {x.simulated_micro_batches} simulated ones, above the "
                        f"{EXTRAPOLATE_ABOVE_OPS} simulated ops a trace can hold: lower "
                        "parallelism.global_batch")
    tracer = source if isinstance(source, ChromeTracer) else chrome_trace(source.records,
                                                                           source.plan)
    return write_trace_file(tracer, path)
