"""ZeRO-1/2's parameter all-gather after the optimizer step (perf/param_gather.py), both engines.

Oracles: the closed forms by hand (a synchronous gather less the pipeline slack; the overlapped
first forward as the two-machine flow shop of Johnson 1954, first gather exposed, each later one
by what it exceeds a layer's forward), and the physics: the gather needs the optimizer step's
result, so no backward hides it, and a layout without ZeRO-1/2 does not depend on the flag.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.memory import stage_params
from simcluster.perf.param_gather import ParamGather, gather_exposed_s, gather_total_s, param_gather
from simcluster.run.single import simulate
from simcluster.sim.build import build_plan
from simcluster.sim.cluster import run_plan
from simcluster.spec import Scenario, load_scenario
from tests.tiny import tiny_scenario

ENGINES = ["analytical", "des"]


def _scenario(zero: int = 1, overlap: bool = False, pp: int = 1, **execution: Any) -> Scenario:
    """Tiny model, TP 2 over 2 DGX A100 nodes: DP 8 (pp 1) or 4 (pp 2), across the nodes."""
    return load_scenario(tiny_scenario(
        "param-gather", parallelism={"tp": 2, "pp": pp, "global_batch": 64, "zero_stage": zero},
        execution={"overlap_param_gather": overlap, "overlap_grad_reduce": True, **execution}))


def test_synchronous_gather_is_exposed_less_the_pipeline_slack() -> None:
    pg = ParamGather(total_s=0.9, layer_s=0.2, overlapped=False)
    assert gather_exposed_s(pg, (4,), forward_s=2.0, stage=0) == pytest.approx(0.9)
    # stage 1 of a 1F1B pipeline: its first activation arrives one stage forward (2.0 s) later
    assert gather_exposed_s(pg, (4,), forward_s=0.5, stage=1) == pytest.approx(0.4)
    assert gather_exposed_s(pg, (4,), forward_s=2.0, stage=1) == 0.0
    # interleaved, 2 chunks: the first activation comes after one chunk's forward (1.0 of 2.0)
    assert gather_exposed_s(pg, (2, 2), forward_s=1.0, stage=1) == pytest.approx(0.4)


def test_overlapped_gather_is_the_flow_shop_of_the_first_forward() -> None:
    # 4 layers, forward 2.0 s (0.5 per layer): gathers of 0.3 hide after the first one
    fast = ParamGather(total_s=1.0, layer_s=0.3, overlapped=True)
    assert gather_exposed_s(fast, (4,), forward_s=2.0, stage=0) == pytest.approx(0.3)
    # gathers of 0.7 outrun the 0.5 s layers: 0.7 + 3 x 0.2
    slow = ParamGather(total_s=2.5, layer_s=0.7, overlapped=True)
    assert gather_exposed_s(slow, (4,), forward_s=2.0, stage=0) == pytest.approx(1.3)
    # two chunks of 2 layers: the first chunk's pass only, 0.7 + 0.2; stage 1 hides 1.0 of it
    assert gather_exposed_s(slow, (2, 2), forward_s=2.0, stage=0) == pytest.approx(0.9)
    assert gather_exposed_s(slow, (2, 2), forward_s=2.0, stage=1) == 0.0
    assert gather_total_s(slow, 4) == pytest.approx(2.8)
    assert gather_total_s(dataclasses.replace(slow, overlapped=False), 4) == 2.5


@given(total=st.floats(0, 10), layer=st.floats(0, 10), fwd=st.floats(1e-3, 100),
       layers=st.tuples(st.integers(0, 8), st.integers(0, 8)), stage=st.integers(0, 16),
       overlapped=st.booleans())
def test_exposed_gather_is_bounded_and_shrinks_with_more_forward(
        total: float, layer: float, fwd: float, layers: tuple[int, int], stage: int,
        overlapped: bool) -> None:
    pg = ParamGather(total, layer, overlapped)
    exposed = gather_exposed_s(pg, layers, fwd, stage)
    assert 0.0 <= exposed <= max(total, layers[0] * layer) + 1e-12
    assert gather_exposed_s(pg, layers, 2 * fwd, stage) <= exposed + 1e-12
    assert gather_exposed_s(pg, layers, fwd, stage + 1) <= exposed + 1e-12


def test_zero1_reduces_gradients_by_reduce_scatter_and_gathers_weights_apart() -> None:
    s = _scenario()
    g = comm_plan.groups(s)
    assert g.dp is not None
    assert g.dp.n == 8
    held = 1.0e8
    # ZeRO-1: only the reduce-scatter of the (fp32, bf16 default) gradients precedes the step
    assert comm_plan.dp_reduce_s(s, g, held, 4) == collective_time("reduce_scatter", 4e8, g.dp).time_s
    pg = param_gather(s, g, held, 8)
    assert pg is not None
    assert pg.total_s == collective_time("all_gather", 2e8, g.dp).time_s  # bf16 weights
    assert pg.layer_s == collective_time("all_gather", 2e8 / 8, g.dp).time_s
    assert param_gather(_scenario(zero=0), g, held, 8) is None
    assert param_gather(_scenario(zero=3), g, held, 8) is None


@pytest.mark.parametrize("engine", ENGINES)
def test_the_gather_is_never_hidden_by_the_backward(engine: str) -> None:
    """Even with the gradient reduction overlapped, the synchronous gather is exposed in full on a
    single-stage layout: its DP exposure is at least the gather alone on idle links."""
    s = _scenario(overlap=False)
    held = stage_params(s.model, s.parallelism, 0, s.model.layers)
    pg = param_gather(s, comm_plan.groups(s), held.dense + held.expert, s.model.layers)
    assert pg is not None
    assert pg.total_s > 0
    step = simulate(s, engine=engine).step
    assert step.breakdown.dp_comm >= 0.99 * pg.total_s


@pytest.mark.parametrize("engine", ENGINES)
def test_overlap_param_gather_changes_zero1_and_only_zero1(engine: str) -> None:
    def step_s(zero: int, overlap: bool) -> float:
        return simulate(_scenario(zero=zero, overlap=overlap, pp=2), engine=engine).step \
            .iteration_time_s
    assert step_s(1, True) < step_s(1, False)
    assert step_s(0, True) == step_s(0, False)


def test_des_issues_the_gathers_at_the_start_and_the_first_forward_waits_for_them() -> None:
    plan = build_plan(_scenario(overlap=True))
    assert plan.stages[0].gathers[1] == 8
    assert plan.stages[0].prologue_s == 0.0
    out = run_plan(plan)
    gathers = [r for r in out.records if r.stream == "dp" and r.name.startswith("param all-gather")]
    assert len(gathers) == 8
    assert gathers[0].start_s == 0.0
    assert all(a.end_s <= b.start_s + 1e-12 for a, b in itertools.pairwise(gathers))
    first = [r for r in out.records if r.stream == "compute" and r.name.startswith("F c0 mb0 L")]
    assert len(first) == 8
    assert first[0].start_s >= gathers[0].end_s

    sync = build_plan(_scenario(overlap=False))
    assert sync.stages[0].gathers == (0.0, 0)
    assert sync.stages[0].prologue_s > 0
    waits = [r for r in run_plan(sync).records if r.name == "wait param all-gather"]
    assert len(waits) == 1
    assert waits[0].start_s == 0.0
