"""One run of a scenario: the step, memory, throughput, MFU and cost, as a flat result.

``simulate`` is the library entry point behind ``simcluster run``; the result converts to the plain
dict of DESIGN.md section 3.3 (``RunResult.to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dataclasses

from simcluster.flows import contention as tier_b_contention
from simcluster.horizon import simulate_reliability
from simcluster.perf.cost import training_cost
from simcluster.perf.memory import MemoryEstimate, estimate_memory
from simcluster.perf.step import StepEstimate, estimate_step
from simcluster.run.perturb import degraded_nodes, needs_contention, with_uniform_links
from simcluster.spec.scenario import Scenario
from simcluster.units import GiB

CONTENTION_MODES = ("auto", "on", "off")


@dataclass(frozen=True, slots=True)
class RunResult:
    """A scenario's step estimate and memory estimate, and everything derived from them."""

    scenario: Scenario
    step: StepEstimate
    memory: MemoryEstimate
    engine: str = "analytical"
    contention: dict[str, float] = dataclasses.field(default_factory=dict)
    reliability: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The output fields of DESIGN.md section 3.3 as plain JSON-ready values."""
        s, step = self.scenario, self.step
        gpus = s.cluster.gpus
        t = step.iteration_time_s
        peak = s.cluster.topology.accelerator.peak(s.precision)
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
                "overhead": stage.overhead_bytes / GiB}

    def _training(self, tokens_per_s: float) -> dict[str, float | None]:
        s = self.scenario
        if s.training.tokens is None:
            return {"time_to_train_days": None, "gpu_hours": None, "cost_usd": None}
        topo = s.cluster.topology
        cost = training_cost(s.training.tokens, tokens_per_s, s.cluster.gpus, s.cluster.nodes,
                             topo.accelerator.tdp_W, s.cost)
        return {"time_to_train_days": cost.time_s / 86400.0, "gpu_hours": cost.gpu_hours,
                "cost_usd": cost.cost_usd}


def simulate(scenario: Scenario, contention: str = "auto",
             reliability_replicas: int = 100) -> RunResult:
    """Estimate one training step of ``scenario`` (analytical engine), and the whole run's
    goodput when ``reliability`` and ``training.tokens`` are given.

    Parameters
    ----------
    scenario : Scenario
        The resolved scenario; uniform link degradations (``perturbations.link_bandwidth`` with
        ``node: null``) are folded into its topology first.
    contention : str
        ``auto`` (Tier B only where it can differ from Tier A: oversubscribed fabric or a degraded
        node), ``on`` or ``off``. The factors multiply the exposed DP and PP communication.
    reliability_replicas : int
        Monte Carlo replicas of the horizon engine (seeded by ``scenario.seed``).
    """
    s = with_uniform_links(scenario)
    step = estimate_step(s)
    factors: dict[str, float] = {}
    if contention == "on" or (contention == "auto" and needs_contention(s)):
        factors = tier_b_contention(s, degraded_nodes=degraded_nodes(s))
        step = apply_contention(step, factors)
    memory = estimate_memory(s, flash_attention=s.execution.flash_attention)
    horizon = None
    if s.reliability is not None and s.training.tokens is not None:
        horizon = simulate_reliability(s, reliability_replicas,
                                       step_time_s=step.iteration_time_s).to_dict()
    return RunResult(scenario, step, memory, contention=factors, reliability=horizon)


def apply_contention(step: StepEstimate, factors: dict[str, float]) -> StepEstimate:
    """``step`` with each category of ``factors`` slowed by its factor (the step grows to match)."""
    scaled = {k: v * factors.get(k, 1.0) for k, v in step.breakdown.as_dict().items()}
    breakdown = type(step.breakdown)(**scaled)
    return dataclasses.replace(step, breakdown=breakdown, iteration_time_s=breakdown.total_s)
