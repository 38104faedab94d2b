"""One run of a scenario: the step, memory, throughput, MFU and cost, as a flat result.

``simulate`` is the library entry point behind ``simcluster run``; the result converts to the plain
dict of docs/metrics.md (``RunResult.to_dict``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from simcluster.errors import check_choice
from simcluster.perf.cost import training_cost
from simcluster.perf.kernels.lowp import gemm_dtype
from simcluster.perf.memory import MemoryEstimate, estimate_memory
from simcluster.perf.offload import host_refusal
from simcluster.perf.step import StepEstimate, TimeBreakdown, estimate_step
from simcluster.run.perturb import (
    check_analytical,
    degraded_nodes,
    needs_contention,
    with_uniform_links,
)
from simcluster.run.validation import validation_block
from simcluster.spec.scenario import Scenario
from simcluster.units import GiB

if TYPE_CHECKING:  # the DES, horizon and flow engines (SimPy, numpy, networkx) load on use
    from simcluster.sim import DesResult

CONTENTION_MODES = ("auto", "on", "off")
ENGINES = ("des", "analytical")
Step: TypeAlias = "StepEstimate | DesResult"


@dataclass(frozen=True, slots=True)
class RunResult:
    """A scenario's step estimate and memory estimate, and everything derived from them."""

    scenario: Scenario
    step: Step
    memory: MemoryEstimate
    engine: str = "analytical"
    contention: dict[str, float] = dataclasses.field(default_factory=dict)
    reliability: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The output fields of docs/metrics.md as plain JSON-ready values."""
        s, step = self.scenario, self.step
        gpus = s.cluster.gpus
        t = step.iteration_time_s
        peak = s.cluster.topology.accelerator.peak(gemm_dtype(s.precision))  # the format's
        tokens_per_s = s.parallelism.global_batch * s.model.seq_len / t
        return {
            "scenario": s.name, "engine": self.engine, "gpus": gpus,
            "iteration_time_s": t, "tokens_per_s": tokens_per_s,
            "model_tflops_per_gpu": step.model_flops / t / gpus / 1e12,
            "mfu": step.model_flops / t / gpus / peak,
            "hardware_tflops_per_gpu": step.hardware_flops / t / gpus / 1e12,
            "hfu": step.hardware_flops / t / gpus / peak,
            "peak_memory_gib": self.memory.peak_bytes / GiB,
            "memory_capacity_gib": self.memory.capacity_bytes / GiB,
            "fits_in_memory": self.memory.fits_in_memory,
            "memory_gib": self._memory_dict(),
            "bubble_fraction": step.bubble_fraction,
            "time_breakdown_s": step.breakdown.as_dict(),
            "dp_comm_total_s": step.dp_total_s, "dp_comm_hidden_s": step.dp_hidden_s,
            "contention": dict(self.contention),
            "validation": validation_block(s),
            **self._training(tokens_per_s),
            **self._reliability(),
        }

    def _reliability(self) -> dict[str, Any]:
        r = self.reliability
        if r is None:
            return {"goodput": None, "expected_time_to_train_days": None,
                    "lost_time_breakdown_h": None}
        return {"goodput": r["goodput"],
                "expected_time_to_train_days": r["time_to_train_days"]["mean"],
                "lost_time_breakdown_h": r["lost_time_breakdown_h"],
                "reliability": r}

    def _memory_dict(self) -> dict[str, Any]:
        stage = self.memory.stages[self.memory.peak_stage]
        return {"stage": stage.stage, "dominant": stage.dominant,
                "weights": stage.weights_bytes / GiB, "grads": stage.grads_bytes / GiB,
                "optimizer": stage.optimizer_bytes / GiB,
                "activations": stage.activations_bytes / GiB,
                "overhead": stage.overhead_bytes / GiB,
                "overhead_parts": {k: v / GiB for k, v in stage.overheads.as_dict().items()},
                **self._host_dict()}

    def _host_dict(self) -> dict[str, Any]:
        """Host memory per node of an offloaded optimizer (``parallelism.offload``; none
        without)."""
        m = self.memory
        if not m.host_bytes:
            return {}
        cap = m.host_capacity_bytes
        return {"host_per_node": m.host_bytes / GiB,
                "host_capacity_per_node": None if cap is None else cap / GiB,
                "host_refusal": host_refusal(m.host_bytes, cap, self.scenario.cluster.topology)}

    def _training(self, tokens_per_s: float) -> dict[str, Any]:
        s = self.scenario
        if s.training.tokens is None:
            return {"time_to_train_days": None, "gpu_hours": None, "cost_usd": None,
                    "cash_usd": None, "capital_usd": None, "network_usd": None,
                    "network_unpriced": [], "energy_usd": None}
        topo = s.cluster.topology
        cost = training_cost(s.training.tokens, tokens_per_s, s.cluster.gpus, s.cluster.nodes,
                             topo.accelerator.tdp_W, s.cost, topo.scale_out)
        return {"time_to_train_days": cost.time_s / 86400.0, "gpu_hours": cost.gpu_hours,
                "cost_usd": cost.cost_usd, "cash_usd": cost.cash_usd,
                "capital_usd": cost.capital_usd, "network_usd": cost.network_usd,
                "network_unpriced": list(cost.network_unpriced), "energy_usd": cost.energy_usd}


def simulate(scenario: Scenario, contention: str = "auto", reliability_replicas: int = 100,
             engine: str = "des") -> RunResult:
    """One training step of ``scenario``, and the whole run's goodput when ``reliability`` and
    ``training.tokens`` are given.

    Parameters
    ----------
    scenario : Scenario
        The resolved scenario.
    contention : str
        ``auto`` (Tier B only where it can differ: an oversubscribed fabric, or for the analytical
        engine a degraded node), ``on`` or ``off``. The factors multiply exposed DP and PP time.
    reliability_replicas : int
        Monte Carlo replicas of the horizon engine (seeded by ``scenario.seed``).
    engine : str
        ``des`` (the discrete-event iteration engine, default) or ``analytical`` (closed forms,
        the fast path). The DES models slow GPUs and degraded links itself; the analytical engine
        slows the slow GPUs' stages (``perf.step``), folds uniform link degradations into the
        topology and prices single nodes' degraded NICs with Tier B; it rejects what it cannot
        honour (a single node's degraded scale-up, or such a NIC with ``contention="off"``).

    Raises
    ------
    SpecError
        ``engine`` or ``contention`` is not one of its choices, or the analytical engine cannot
        honour a perturbation.
    """
    step, factors = engine_step(scenario, contention, engine)
    s = with_uniform_links(scenario) if engine == "analytical" else scenario
    memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
    horizon = None
    if s.reliability is not None and s.training.tokens is not None:
        from simcluster.horizon import simulate_reliability
        from simcluster.run.straggler import resolve_straggler

        s = resolve_straggler(s, contention, engine, step.iteration_time_s)
        horizon = simulate_reliability(s, reliability_replicas, step_time_s=step.iteration_time_s,
                                       step_engine=engine).to_dict()
    return RunResult(scenario, step, memory, engine=engine, contention=factors, reliability=horizon)


def engine_step(scenario: Scenario, contention: str = "auto", engine: str = "des"
                ) -> tuple[Step, dict[str, float]]:
    """The step of ``scenario`` by ``engine``, with its contention factors (those of ``simulate``:
    ``simcluster reliability`` uses it too, so both commands share the step time)."""
    check_choice("engine", engine, ENGINES)
    check_choice("contention", contention, CONTENTION_MODES)
    if engine == "analytical":
        check_analytical(scenario, contention)
    s = with_uniform_links(scenario) if engine == "analytical" else scenario
    step: Step = estimate_step(s) if engine == "analytical" else _des_step(s)
    factors = _contention(s, contention, engine)
    return (apply_contention(step, factors) if factors else step), factors


def _des_step(s: Scenario) -> DesResult:
    from simcluster.sim import simulate_step

    return simulate_step(s)


def _contention(s: Scenario, mode: str, engine: str) -> dict[str, float]:
    nodes = degraded_nodes(s) if engine == "analytical" else {}
    wanted = mode == "on" or (mode == "auto" and needs_contention(s, bool(nodes)))
    if not wanted:
        return {}
    from simcluster.flows import contention as tier_b_contention

    return tier_b_contention(s, degraded_nodes=nodes)


def apply_contention(step: Step, factors: dict[str, float]) -> Step:
    """``step`` with each category of ``factors`` slowed by its factor (the step grows to match)."""
    scaled = {k: v * factors.get(k, 1.0) for k, v in step.breakdown.as_dict().items()}
    breakdown = TimeBreakdown(**scaled)
    return dataclasses.replace(step, breakdown=breakdown, iteration_time_s=breakdown.total_s)
