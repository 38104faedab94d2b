"""Extrapolation of long steps from their periodic steady state (sim/periodic.py)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import simpy

from simcluster.errors import SpecError
from simcluster.observe.tracer import ChromeTracer
from simcluster.sim import periodic, simulate_step, write_trace
from simcluster.sim.network import Network
from simcluster.sim.periodic import with_micro_batches
from simcluster.sim.result import DesResult
from simcluster.sim.step import no_cyclic_gc
from simcluster.spec import Scenario, load_scenario
from tests.conftest import ROOT
from tests.golden.sim_cases import tiny


def _assert_same(got: DesResult, full: DesResult) -> None:
    assert got.extrapolation is not None
    assert got.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
    for key, value in full.breakdown.as_dict().items():
        assert got.breakdown.as_dict()[key] == pytest.approx(value, rel=1e-9, abs=1e-15)
    assert got.dp_total_s == pytest.approx(full.dp_total_s, rel=1e-9, abs=1e-15)
    assert got.dp_hidden_s == pytest.approx(full.dp_hidden_s, rel=1e-9, abs=1e-15)
    assert (got.critical_group, got.critical_stage) == (full.critical_group, full.critical_stage)
    if got.extrapolation.counts_exact:
        assert got.record_count == full.record_count
        assert got.critical_path_records == full.critical_path_records


@pytest.mark.parametrize(("schedule", "extra"), [("gpipe", {}), ("1f1b", {}), ("zb-h1", {}),
                                                 ("interleaved", {"virtual_stages": 2})])
def test_extrapolated_step_equals_the_full_simulation(schedule: str, extra: dict[str, int]) -> None:
    s = with_micro_batches(tiny(pp=2, schedule=schedule, **extra), 203)
    got = simulate_step(s, extrapolate_above=0)
    assert got.extrapolation is not None
    assert got.extrapolation.repeats > 0
    _assert_same(got, simulate_step(s, extrapolate_above=None))


def test_a_straggler_step_is_extrapolated_exactly() -> None:
    s = with_micro_batches(load_scenario(ROOT / "scenarios" / "straggler-gpu.yaml"), 101)
    _assert_same(simulate_step(s, extrapolate_above=0), simulate_step(s, extrapolate_above=None))


def test_four_million_micro_batches_are_extrapolated() -> None:
    s = with_micro_batches(tiny(pp=2), 4 * 2**20)
    got = simulate_step(s)
    assert got.extrapolation is not None
    assert got.extrapolation.micro_batches == 4 * 2**20
    assert got.extrapolation.simulated_micro_batches < 100
    short = simulate_step(with_micro_batches(s, got.extrapolation.simulated_micro_batches))
    per_mb = (got.iteration_time_s - short.iteration_time_s) / got.extrapolation.repeats / 2
    assert got.iteration_time_s > short.iteration_time_s
    assert per_mb > 0


def _long() -> Scenario:
    return with_micro_batches(tiny(pp=2), 2**20)


def test_a_trace_of_an_extrapolated_step_is_refused(tmp_path: Path) -> None:
    got = simulate_step(_long())
    with pytest.raises(SpecError, match=r"parallelism\.global_batch"):
        write_trace(got, tmp_path / "t.json")
    with pytest.raises(SpecError, match="--trace"):
        simulate_step(_long(), tracer=ChromeTracer())


def test_a_long_step_without_steady_state_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(periodic, "SAMPLE_OPS", 0)
    with pytest.raises(SpecError) as err:
        simulate_step(_long())
    assert err.value.key == "parallelism.global_batch"
    assert str(periodic.FULL_LIMIT_OPS) in err.value.message


def test_a_short_step_is_simulated_in_full() -> None:
    got = simulate_step(tiny(pp=2))
    assert got.extrapolation is None
    assert got.record_count == len(got.records)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_callers_gc_state_is_restored(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        simulate_step(tiny(pp=2))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_connected_fast_path_agrees_with_the_search() -> None:
    env = simpy.Environment()
    net = Network(env)
    paths = [("a", "b"), ("c",), ("b", "d"), ("e", "f"), ("f",), ("g",)]
    for k, links in enumerate(paths):
        net.transfer(f"t{k}", links, 1.0 + k)
    for links in [("a",), ("c",), ("e",), ("g",), ("x",), ("a", "c"), ("d", "g")]:
        assert net._connected(links) == net._search(links)
