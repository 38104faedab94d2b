"""The discrete-event step: ``simulate_step(scenario) -> DesResult``, the engine behind
``simcluster run`` (the analytical :func:`simcluster.perf.step.estimate_step` stays the fast path
and the oracle).

build (plan from ``perf/`` durations, schedules and replica classes) -> wire and run
(:mod:`.cluster`) -> collect (:mod:`.collect`) -> optional trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simcluster.observe.ledger import CATEGORIES
from simcluster.observe.records import OpRecord
from simcluster.observe.tracer import ChromeTracer, Tracer
from simcluster.perf.flops import hardware_flops_per_iteration, model_flops_per_iteration
from simcluster.perf.step import TimeBreakdown
from simcluster.sim.build import build_plan
from simcluster.sim.cluster import run_plan
from simcluster.sim.collect import collect
from simcluster.sim.perturb import Perturbations, perturbations_of
from simcluster.sim.plan import StepPlan
from simcluster.sim.trace import chrome_trace, emit, write_trace_file
from simcluster.spec.scenario import Scenario


@dataclass(frozen=True, slots=True)
class DesResult:
    """One simulated step, shaped like :class:`simcluster.perf.step.StepEstimate`.

    Attributes
    ----------
    iteration_time_s : float
        Step time, seconds (equals ``breakdown.total_s``).
    breakdown : TimeBreakdown
        Exposed seconds per category on the critical stage.
    model_flops, hardware_flops : float
        Per step, whole job (as the analytical estimate).
    dp_total_s, dp_hidden_s : float
        DP bucket reduction on the critical stage: wall time on the DP stream, and the part
        hidden under compute.
    critical_group, critical_stage : str, int
        The replica class and stage that held the step up.
    critical_path : tuple[OpRecord, ...]
        The chain of ops, waits and transfers that released one another, start to end.
    records : tuple[OpRecord, ...]
        The event log.
    plan : StepPlan
        What was simulated (replica classes and multiplicities included).
    """

    iteration_time_s: float
    breakdown: TimeBreakdown
    model_flops: float
    hardware_flops: float
    dp_total_s: float
    dp_hidden_s: float
    critical_group: str
    critical_stage: int
    critical_path: tuple[OpRecord, ...]
    records: tuple[OpRecord, ...]
    plan: StepPlan

    @property
    def bubble_fraction(self) -> float:
        """Pipeline idle share of the step (bubble / step time)."""
        return self.breakdown.bubble / self.iteration_time_s if self.iteration_time_s else 0.0

    @property
    def simulated_gpus(self) -> int:
        """Stage GPUs actually simulated (replica classes x stages)."""
        return len(self.plan.stages)

    def event_log(self) -> list[str]:
        """One line per record, times in ns: the golden-test form of the step."""
        return [f"{r.eid} {r.group} s{r.stage} {r.stream} {r.name} {r.category} "
                f"{r.start_s * 1e9:.3f} {r.end_s * 1e9:.3f} gate={r.gate}" for r in self.records]


def run(plan: StepPlan, model_flops: float = 0.0, hardware_flops: float = 0.0,
        tracer: Tracer | None = None) -> DesResult:
    """Simulate a ready-made plan (tests build plans by hand)."""
    out = run_plan(plan)
    got = collect(out, plan)
    seconds = got.ledger.as_dict()
    breakdown = TimeBreakdown(**{c: seconds[c] for c in CATEGORIES})
    if tracer is not None:
        emit(out.records, plan, tracer)
    return DesResult(iteration_time_s=breakdown.total_s, breakdown=breakdown,
                     model_flops=model_flops, hardware_flops=hardware_flops,
                     dp_total_s=got.dp_total_s, dp_hidden_s=got.dp_hidden_s,
                     critical_group=got.critical_group, critical_stage=got.critical_stage,
                     critical_path=got.critical_path, records=out.records, plan=plan)


def simulate_step(scenario: Scenario, tracer: Tracer | None = None,
                  perturbations: Perturbations | None = None) -> DesResult:
    """Simulate one training step of ``scenario`` as discrete events.

    Parameters
    ----------
    scenario : Scenario
        A resolved scenario.
    tracer : Tracer, optional
        Receives the step's spans (e.g. :class:`~simcluster.observe.tracer.ChromeTracer`).
    perturbations : Perturbations, optional
        Slow GPUs and degraded links; default: the scenario's ``perturbations`` section, if any.

    Returns
    -------
    DesResult
        Step time, breakdown, critical path, DP overlap, FLOPs and the event log.
    """
    pert = perturbations if perturbations is not None else perturbations_of(scenario)
    plan = build_plan(scenario, pert)
    par = scenario.parallelism
    return run(plan, model_flops_per_iteration(scenario.model, par.global_batch),
               hardware_flops_per_iteration(scenario.model, par.global_batch, par.recompute),
               tracer)


def write_trace(source: DesResult | ChromeTracer, path: str | Path) -> Path:
    """Write a Chrome/Perfetto JSON trace of a result (or of a filled tracer), atomically."""
    tracer = source if isinstance(source, ChromeTracer) else chrome_trace(source.records,
                                                                           source.plan)
    return write_trace_file(tracer, path)
