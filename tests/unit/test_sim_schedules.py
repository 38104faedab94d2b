"""DES pipeline schedules against the closed forms of ``perf.pipeline`` (SC'21 section 2.2; ZB-H1).

With equal stages, zero communication and no contention the simulated bubble must equal
``perf.pipeline.bubble_time_s`` exactly (up to float rounding): (p-1)/(m+p-1) of the step for
GPipe and 1F1B, (p-1)(t_f+t_b)/v for interleaved, (p-1)(T_F+T_B-T_W) for ZB-H1.
"""

from __future__ import annotations

from collections import Counter

import pytest

from simcluster.errors import InvariantError
from simcluster.perf.pipeline import bubble_fraction, bubble_time_s
from simcluster.sim import run
from simcluster.sim.build import uniform_plan
from simcluster.sim.cluster import SimulationError
from simcluster.sim.plan import Op, StagePlan, StepPlan
from simcluster.sim.schedules import stage_order

GRID = [(2, 4), (4, 8), (4, 12), (8, 16), (3, 7), (4, 4), (1, 5)]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("p", "m"), GRID)
def test_gpipe_and_1f1b_bubble_fraction_is_closed_form(schedule: str, p: int, m: int) -> None:
    result = run(uniform_plan(schedule, p, m, 1.0, 2.0))
    assert result.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), rel=1e-12, abs=1e-15)
    assert result.iteration_time_s == pytest.approx((m + p - 1) * 3.0, rel=1e-12)


@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 12), (8, 16), (4, 4)])
def test_interleaved_bubble_is_closed_form(v: int, p: int, m: int) -> None:
    result = run(uniform_plan("interleaved", p, m, 1.0, 2.0, v))
    assert result.breakdown.bubble == pytest.approx(bubble_time_s("interleaved", p, m, 1.0, 2.0, v),
                                                    rel=1e-12)
    assert result.bubble_fraction == pytest.approx(bubble_fraction("interleaved", p, m, v),
                                                   rel=1e-12)


@pytest.mark.parametrize(("p", "m"), GRID)
def test_zb_h1_bubble_is_closed_form_with_equal_f_b_w(p: int, m: int) -> None:
    # T_F = T_B = T_W = 1: full backward t_b = 2, weight gradient t_w = 1.
    result = run(uniform_plan("zb-h1", p, m, 1.0, 2.0, t_w=1.0))
    assert result.breakdown.bubble == pytest.approx(bubble_time_s("zb-h1", p, m, 1.0, 2.0, 1, 1.0),
                                                    abs=1e-12)
    assert result.bubble_fraction == pytest.approx(bubble_fraction("zb-h1", p, m), rel=1e-12)


@pytest.mark.parametrize(("schedule", "v"), [("gpipe", 1), ("1f1b", 1), ("interleaved", 2),
                                             ("zb-h1", 1)])
def test_every_op_runs_exactly_once_per_stage(schedule: str, v: int) -> None:
    p, m = 4, 8
    kinds = {"zb-h1": ("F", "Bi", "W")}.get(schedule, ("F", "B"))
    for stage in range(p):
        ops = Counter(stage_order(schedule, p, m, stage, v))
        assert set(ops.values()) == {1}
        assert {(o.kind, o.chunk, o.mb) for o in ops} == {
            (k, c, j) for k in kinds for c in range(v) for j in range(m)}


def test_1f1b_warmup_is_megatrons() -> None:
    # Stage i runs min(p-i-1, m) forwards before its first backward (Megatron schedules.py).
    order = stage_order("1f1b", 4, 8, 1)
    assert [o.kind for o in order[:4]] == ["F", "F", "F", "B"]


@pytest.mark.parametrize(("p", "m", "v"), [(4, 6, 2), (4, 5, 3), (3, 4, 2), (4, 2, 2)])
def test_interleaved_with_a_partial_group_completes(p: int, m: int, v: int) -> None:
    result = run(uniform_plan("interleaved", p, m, 1.0, 2.0, v))
    assert result.iteration_time_s >= m * 3.0


def test_uneven_stage_sets_the_pace() -> None:
    # A last stage 50% slower (logits) stretches the step by (m) x its extra time at least.
    plan = uniform_plan("1f1b", 4, 8, 1.0, 2.0)
    slow = plan.stages[-1]
    heavier = tuple(Op(o.name, o.kind, o.duration_s * 1.5, (("compute", o.duration_s * 1.5),),
                       o.recv, o.send) for o in slow.ops)
    stages = (*plan.stages[:-1], StagePlan(slow.group, slow.stage, heavier, 0.0))
    uneven = run(StepPlan(plan.pp, plan.groups, stages, plan.dp_buckets, {}))
    assert uneven.iteration_time_s >= 8 * 4.5
    assert uneven.iteration_time_s > run(plan).iteration_time_s


def test_a_schedule_that_deadlocks_is_an_error() -> None:
    plan = uniform_plan("1f1b", 2, 2, 1.0, 2.0)
    stuck = StagePlan("nominal", 0, tuple(reversed(plan.stages[0].ops)), 0.0)
    with pytest.raises(SimulationError, match="deadlocked"):
        run(StepPlan(2, plan.groups, (stuck, plan.stages[1]), plan.dp_buckets, {}))


def test_stage_order_refuses_impossible_arguments_as_internal_errors() -> None:
    """The scenario checks validate the schedule and sizes first; here they are bugs."""
    with pytest.raises(InvariantError, match="stage"):
        stage_order("1f1b", 4, 8, 4)
    with pytest.raises(InvariantError, match="pipedream"):
        stage_order("pipedream", 4, 8, 0)
