"""The checkpoint snapshot priced from the model (issue 25 item 2): each GPU's shard over its host
link at the measured pinned-copy rate, unless ``checkpoint.snapshot_s`` is set."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.horizon.config import default_snapshot_s, horizon_config
from simcluster.perf.params import count_params
from simcluster.perf.reliability import (
    PINNED_COPY_EFFICIENCY,
    checkpoint_bytes_per_gpu,
    snapshot_time_s,
)
from simcluster.spec import load_scenario
from tests.tiny import tiny_scenario

HOST_LINK = (Path(__file__).resolve().parents[1] / "validation" / "data" / "h100_measured"
             / "host_link.csv")


def test_snapshot_oracle() -> None:
    """6.6 GB on a PCIe 5.0 x16 link (64 GB/s) at 0.86: 0.12 s; two GPUs behind one switch: 2x."""
    assert snapshot_time_s(6.6e9, 64e9) == pytest.approx(6.6e9 / (64e9 * 0.86))
    assert snapshot_time_s(6.6e9, 64e9, 2) == pytest.approx(2 * snapshot_time_s(6.6e9, 64e9))


def test_the_efficiency_is_the_measured_pinned_rate() -> None:
    """H100 SXM, PCIe 5.0 x16, pinned copies of 1 and 4 GiB: 54.7-54.9 GB/s = 0.85-0.86 of 64."""
    with HOST_LINK.open() as f:
        rows = [r for r in csv.DictReader(f) if r["host_memory"] == "pinned"
                and r["direction"] == "d2h" and int(r["MiB"]) >= 1024]
    assert len(rows) == 2
    for row in rows:
        assert float(row["GBps"]) / 64.0 == pytest.approx(PINNED_COPY_EFFICIENCY, abs=0.01)


def _scenario(**checkpoint: object) -> object:
    return load_scenario(tiny_scenario(
        "s", reliability={}, checkpoint={"mode": "async", "interval_min": 30, **checkpoint}))


def test_the_default_snapshot_is_the_shard_over_the_host_link() -> None:
    s = _scenario()
    params = float(count_params(s.model).total)
    par, host = s.parallelism, s.cluster.topology.host
    shard = checkpoint_bytes_per_gpu(params, par.tp * par.pp * par.cp, par.dp, par.zero_stage,
                                     s.checkpoint.bytes_per_param)
    expected = snapshot_time_s(shard, host.pcie_Bps, host.gpus_per_pcie_switch)
    assert default_snapshot_s(s, params) == pytest.approx(expected)
    cfg = horizon_config(s, 1.0)
    assert cfg.checkpoint.blocking_s == pytest.approx(expected)


def test_a_stated_snapshot_wins() -> None:
    cfg = horizon_config(_scenario(snapshot_s=7.0), 1.0)
    assert cfg.checkpoint.blocking_s == 7.0


@given(st.floats(1e6, 1e12), st.floats(1e9, 1e12), st.integers(1, 8))
def test_the_snapshot_grows_with_the_shard_and_the_sharing(shard: float, pcie: float,
                                                           share: int) -> None:
    t = snapshot_time_s(shard, pcie, share)
    assert t > 0
    assert snapshot_time_s(2 * shard, pcie, share) == pytest.approx(2 * t)
    assert snapshot_time_s(shard, 2 * pcie, share) == pytest.approx(t / 2)
    assert t >= shard / pcie  # never faster than the line rate


def test_persist_is_the_busiest_node_over_its_storage_share() -> None:
    """Issue 25: persist = a node's GPUs' shards over min(its share of the storage bandwidth, its
    own storage link). 8 GPUs x 10 GB on one of 4 nodes sharing 100 GB/s: 80 GB / 25 GB/s = 3.2 s;
    behind a 10 GB/s link: 8 s."""
    from simcluster.horizon.config import node_write_s
    from simcluster.spec.scenario import CheckpointSpec

    ck = CheckpointSpec(storage_write_Bps=100e9)
    assert node_write_s(ck, 80e9, 4) == pytest.approx(3.2)
    capped = CheckpointSpec(storage_write_Bps=100e9, node_storage_Bps=10e9)
    assert node_write_s(capped, 80e9, 4) == pytest.approx(8.0)


@given(st.floats(1e8, 1e12), st.integers(1, 4096), st.floats(1e9, 1e13),
       st.one_of(st.none(), st.floats(1e8, 1e11)))
def test_persist_never_beats_the_aggregate_bandwidth(node_share_bytes: float, nodes: int,
                                                     storage_Bps: float,
                                                     node_link_Bps: float | None) -> None:
    """Property: the write takes at least the whole checkpoint over the storage bandwidth and at
    least one node's equal share over its own storage link; without such a link, exactly the
    former (deduplicated saves spread the bytes evenly)."""
    from simcluster.horizon.config import checkpoint_plan
    from simcluster.spec.scenario import CheckpointSpec

    ck = CheckpointSpec(storage_write_Bps=storage_Bps, bytes_per_param=14.0,
                        node_storage_Bps=node_link_Bps)
    params = node_share_bytes * nodes / 14.0
    plan = checkpoint_plan(ck, params, 1.0, nodes=nodes)
    aggregate = 14.0 * params / storage_Bps
    assert plan.write_s >= aggregate * (1 - 1e-9)
    if node_link_Bps is None:
        assert plan.write_s == pytest.approx(aggregate)
    else:
        assert plan.write_s >= node_share_bytes / node_link_Bps * (1 - 1e-9)
