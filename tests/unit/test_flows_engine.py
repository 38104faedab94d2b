"""Tier B flow-level simulation: closed-form advance, re-solve only when the active set changes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main
from simcluster.errors import InvariantError
from simcluster.flows.engine import simulate
from simcluster.flows.plan import FlowClass, Phase, Transfer
from tests.flows_reference import scaled, with_latencies

ROOT = Path(__file__).resolve().parents[2]

A = (("x", 0), ("y", 0))
B = (("y", 0), ("z", 0))


def _one(usage: tuple[tuple[tuple[tuple[str, int], tuple[str, int]], float], ...], nbytes: float,
         latency_s: float = 0.0, start_s: float = 0.0) -> Transfer:
    return Transfer((Phase((FlowClass(usage, nbytes),), latency_s),), start_s)


def test_single_flow_pays_latency_then_bytes_over_capacity() -> None:
    result = simulate([_one(((A, 1.0),), 100.0, latency_s=3.0)], {A: 10.0})
    assert result.finish_s == pytest.approx((13.0,))


def test_an_edge_without_capacity_is_an_internal_error() -> None:
    """Capacities are built from the plan's own edges: a missing one is a bug, not bad input."""
    with pytest.raises(InvariantError, match="no capacity"):
        simulate([_one(((A, 1.0), (B, 1.0)), 100.0)], {A: 10.0})


def test_two_flows_share_then_the_survivor_speeds_up() -> None:
    """100 B and 300 B on a 10 B/s link: 5 B/s each until t = 20, then 200 B at 10 B/s: t = 40."""
    result = simulate([_one(((A, 1.0),), 100.0), _one(((A, 1.0),), 300.0)], {A: 10.0})
    assert result.finish_s == pytest.approx((20.0, 40.0))
    assert result.solves == 2  # both active, then the survivor alone


def test_late_start_and_disjoint_links() -> None:
    """A flow starting at t = 5 on another link does not disturb the first."""
    result = simulate([_one(((A, 1.0),), 100.0), _one(((B, 1.0),), 50.0, start_s=5.0)],
                      {A: 10.0, B: 10.0})
    assert result.finish_s == pytest.approx((10.0, 10.0))


def test_phases_run_in_order_with_their_latencies() -> None:
    phases = (Phase((FlowClass(((A, 1.0),), 100.0),), 1.0), Phase((FlowClass(((B, 1.0),), 50.0),), 2.0))
    result = simulate([Transfer(phases)], {A: 10.0, B: 5.0})
    assert result.finish_s == pytest.approx((1.0 + 10.0 + 2.0 + 10.0,))


def test_empty_and_zero_byte_classes_finish_at_once() -> None:
    result = simulate([_one((), 100.0, latency_s=2.0), _one(((A, 1.0),), 0.0)], {A: 10.0})
    assert result.finish_s == pytest.approx((2.0, 0.0))


def test_no_bandwidth_never_finishes() -> None:
    assert simulate([_one(((A, 1.0),), 1.0)], {A: 0.0}).finish_s == (math.inf,)


def test_scaled_and_with_latencies() -> None:
    t = with_latencies(scaled(_one(((A, 1.0),), 1.0), 50.0), [4.0])
    assert simulate([t], {A: 10.0}).finish_s == pytest.approx((9.0,))


@pytest.mark.parametrize("op", ["all_to_all", "send_recv"])
def test_a_rate_beyond_the_clock_resolution_finishes(tmp_path: Path, op: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # scale_up.bandwidth_GBps 1.5e42: time left below one ulp of the clock looped forever
    doc = yaml.safe_load((ROOT / "topologies" / "dgx-h100.yaml").read_text())
    doc["scale_up"]["bandwidth_GBps"] = 1.5e42
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump(doc))
    argv = ["collective", "--topology", str(path), "--nodes", "2", "--tier", "B", "--bytes", "1M",
            "--op", op, "--json"]
    assert main(argv) == 0
    assert "busbw" in capsys.readouterr().out
