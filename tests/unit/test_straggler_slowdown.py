"""A straggler episode's slowdown from the step engine (issue 25 item 2): the episode names what it
degrades on its node (``reliability.straggler_degrades``) and the step engine prices it, unless
``reliability.straggler_slowdown`` gives a number."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.horizon.config import horizon_config
from simcluster.perf.step import estimate_step
from simcluster.run.straggler import resolve_straggler, straggler_scenario, straggler_slowdown
from simcluster.spec import load_scenario
from simcluster.spec.scenario import ReliabilitySpec, Scenario, StragglerDegradeSpec

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = load_scenario(ROOT / "scenarios" / "default.yaml")
SEED = ROOT / "scenarios" / "seed-degraded-stragglers.yaml"


def _with(what: str, factor: float, rate: float = 0.1, *, nodes: int | None = None,
          slowdown: float | None = None) -> Scenario:
    rel = ReliabilitySpec(stragglers_per_node_day=rate, straggler_slowdown=slowdown,
                          straggler_degrades=StragglerDegradeSpec(what=what, factor=factor))
    s = dataclasses.replace(DEFAULT, reliability=rel)
    if nodes is not None:
        s = dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, nodes=nodes))
    return s


@pytest.mark.parametrize(("what", "gpus", "links"), [
    ("gpu", [(0, 0, 0.5)], []), ("node", [(0, None, 0.5)], []),
    ("scale_out", [], [("scale_out", 0, 0.5)]), ("scale_up", [], [("scale_up", 0, 0.5)])])
def test_the_episode_degrades_node_zero(what: str, gpus: list, links: list) -> None:
    """The episode's degradation lands on node 0 as the matching perturbation entry."""
    pert = straggler_scenario(_with(what, 0.5)).perturbations
    assert [(g.node, g.gpu, g.factor) for g in pert.gpu_slowdown] == gpus
    assert [(x.layer, x.node, x.factor) for x in pert.link_bandwidth] == links


def test_a_slow_gpu_is_its_stage_slowed() -> None:
    """Oracle: one GPU at half speed slows its TP group's stage (``perf.step`` with the same
    perturbation); the multiplier is that step over the nominal one."""
    s = _with("gpu", 0.5)
    expected = (estimate_step(straggler_scenario(s)).iteration_time_s
                / estimate_step(s).iteration_time_s)
    assert straggler_slowdown(s) == pytest.approx(expected)
    assert 1.2 < expected < 2.0


def test_nics_of_a_lone_node_cost_nothing() -> None:
    """Oracle: a one-node job sends nothing over its NICs, so halving them slows nothing."""
    assert straggler_slowdown(_with("scale_out", 0.5, nodes=1)) == pytest.approx(1.0)


def test_a_number_overrides_and_no_episode_needs_nothing() -> None:
    """``straggler_slowdown`` given: kept as is; no episodes: the scenario is left alone."""
    given_ = _with("gpu", 0.5, slowdown=1.7)
    assert resolve_straggler(given_) is given_
    quiet = _with("gpu", 0.5, rate=0.0)
    assert resolve_straggler(quiet) is quiet
    resolved = resolve_straggler(_with("gpu", 0.5)).reliability
    assert resolved is not None
    assert resolved.straggler_slowdown == pytest.approx(straggler_slowdown(_with("gpu", 0.5)))


def test_unresolved_slowdown_is_refused_by_the_horizon() -> None:
    """The horizon never guesses: a null slowdown with episodes names the key."""
    with pytest.raises(SpecError, match=r"reliability\.straggler_slowdown"):
        horizon_config(_with("gpu", 0.5), 1.0)
    horizon_config(_with("gpu", 0.5, rate=0.0), 1.0)  # no episodes: nothing to price


@settings(max_examples=12, deadline=None)
@given(st.floats(0.2, 1.0), st.floats(0.2, 1.0))
def test_slower_gpus_never_slow_the_step_less(a: float, b: float) -> None:
    """Property: the multiplier lies in [1, 1/factor] (a stage at ``factor`` speed is the most the
    episode can stretch a step) and never grows with the factor."""
    low, high = sorted((a, b))
    slow_low, slow_high = straggler_slowdown(_with("gpu", low)), straggler_slowdown(_with("gpu", high))
    assert 1.0 <= slow_high <= slow_low <= 1.0 / low + 1e-9


def test_reliability_prints_the_engine_s_multiplier(capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's 800G -> 400G episode is priced by the network model and printed."""
    assert main(["reliability", str(SEED), "--fast", "--replicas", "2"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("stragglers"))
    factor = float(line.rsplit("x", 1)[1])
    assert 1.0 <= factor < 1.5  # one node's NICs, not the former constant 2
