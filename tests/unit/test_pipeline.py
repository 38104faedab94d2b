"""Pipeline closed forms exactly (SC'21 section 2.2; the zero-bubble README), plus properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf import pipeline

stages = st.integers(1, 64)
micro = st.integers(1, 512)
chunks = st.integers(2, 8)


def test_network_md_1f1b_idle_fraction() -> None:
    """p=8, m=32: 1F1B idle = 7/39 = 17.95 % of the makespan."""
    assert pipeline.bubble_fraction("1f1b", 8, 32) == pytest.approx(7 / 39, rel=1e-12)
    assert round(100 * pipeline.bubble_fraction("1f1b", 8, 32), 2) == 17.95


def test_network_md_interleaved_bubble_over_ideal() -> None:
    """Interleaved v=4: bubble / ideal = (p-1)/(v m) = 7/128 = 5.47 %."""
    ratio = pipeline.bubble_over_ideal("interleaved", 8, 32, 4)
    assert ratio == pytest.approx(7 / 128, rel=1e-12)
    assert round(100 * ratio, 2) == 5.47


def test_network_md_zb_h1_third_of_1f1b() -> None:
    """ZB-H1 with T_F = T_B = T_W (t_b = 2 t_f, t_w = t_f) has 1/3 of the 1F1B bubble time."""
    zb = pipeline.bubble_time_s("zb-h1", 8, 32, t_f=1.0, t_b=2.0, t_w=1.0)
    f1b = pipeline.bubble_time_s("1f1b", 8, 32, t_f=1.0, t_b=2.0)
    assert zb / f1b == pytest.approx(1 / 3, rel=1e-12)
    assert pipeline.bubble_fraction("zb-h1", 8, 32) == pytest.approx(7 / (96 + 7), rel=1e-12)


def test_network_md_peak_in_flight() -> None:
    """Peak in-flight micro-batches on stage 0: 1F1B p; interleaved ceil(p(1+(p-1)/(p v)))."""
    assert pipeline.in_flight_microbatches("1f1b", 8, 32, stage=0) == 8
    interleaved = pipeline.in_flight_microbatches("interleaved", 8, 32, 4, stage=0)
    assert math.ceil(interleaved) == math.ceil(8 * (1 + 7 / 32)) == 10
    assert interleaved == pytest.approx(8 + 7 / 4)


def test_in_flight_by_schedule_and_stage() -> None:
    """GPipe holds all m; 1F1B stage i holds p - i, capped at m; the last stage holds 1."""
    assert pipeline.in_flight_microbatches("gpipe", 4, 16, stage=3) == 16
    assert pipeline.in_flight_microbatches("1f1b", 4, 16, stage=3) == 1
    assert pipeline.in_flight_microbatches("zb-h1", 8, 3, stage=0) == 3
    last = pipeline.in_flight_microbatches("interleaved", 4, 16, 2, stage=3)
    assert last == pytest.approx((4 + 1) / 2)  # warm-up (v-1)p = 4 chunks, plus one


def test_pipeline_time_is_work_plus_bubble() -> None:
    """1F1B step = (m + p - 1)(t_f + t_b)."""
    assert pipeline.pipeline_time_s("1f1b", 4, 8, 1e-3, 2e-3) == pytest.approx(11 * 3e-3)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(("pipedream", 4, 8), {}), (("1f1b", 0, 8), {}), (("1f1b", 4, 8, 2), {}),
     (("interleaved", 4, 8, 0), {})],
)
def test_bad_input_raises(args: tuple[str, int, int], kwargs: dict[str, int]) -> None:
    """Unknown schedules, non-positive sizes and v > 1 outside interleaved are SpecErrors."""
    with pytest.raises(SpecError):
        pipeline.bubble_fraction(*args, **kwargs)


def test_bad_stage_times_raise() -> None:
    """t_w larger than the backward it belongs to is rejected."""
    with pytest.raises(SpecError):
        pipeline.bubble_time_s("zb-h1", 4, 8, 1.0, 1.0, t_w=2.0)
    with pytest.raises(SpecError):
        pipeline.in_flight_microbatches("1f1b", 4, 8, stage=4)


@given(st.sampled_from(["gpipe", "1f1b", "zb-h1"]), stages, micro)
def test_fraction_in_unit_interval_and_decreasing_in_m(schedule: str, p: int, m: int) -> None:
    """0 <= fraction < 1, strictly smaller with one more micro-batch when p > 1, zero at p = 1."""
    now = pipeline.bubble_fraction(schedule, p, m)
    more = pipeline.bubble_fraction(schedule, p, m + 1)
    assert 0.0 <= now < 1.0
    assert (more < now) if p > 1 else (now == more == 0.0)


@given(stages, micro, chunks)
def test_interleaved_not_worse_than_1f1b(p: int, m: int, v: int) -> None:
    """Interleaving divides the bubble by v, so its fraction never exceeds 1F1B's."""
    interleaved = pipeline.bubble_fraction("interleaved", p, m, v)
    assert 0.0 <= interleaved <= pipeline.bubble_fraction("1f1b", p, m)
    assert interleaved > pipeline.bubble_fraction("interleaved", p, m + 1, v) or p == 1


@given(stages, micro, st.floats(0.0, 1.0), st.floats(1e-6, 1.0))
def test_zb_h1_bubble_between_zero_and_1f1b(p: int, m: int, share: float, t_b: float) -> None:
    """Moving weight-gradient work into the bubble never makes ZB-H1 worse than 1F1B."""
    zb = pipeline.bubble_time_s("zb-h1", p, m, 0.5 * t_b, t_b, t_w=share * t_b)
    assert 0.0 <= zb <= pipeline.bubble_time_s("1f1b", p, m, 0.5 * t_b, t_b) + 1e-15
