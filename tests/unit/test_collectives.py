"""Tier A collectives: formula oracles, group placement, tuner and metamorphic properties.

Oracles are the closed forms of Thakur, Rabenseifner and Gropp (IJHPCA 2005) and nccl-tests
``doc/PERFORMANCE.md`` (ring all-reduce ``2(n-1)/n S/B + 2(n-1) alpha``), applied to the raw,
uncalibrated functions; properties (busbw invariance in n, monotonicity in size, more bandwidth
never slower) run on the calibrated model.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf import collectives_formulas as f
from simcluster.perf.collectives import (
    ALGOS,
    AUTO_ALGOS,
    OP_ALGOS,
    OPS,
    CommGroup,
    applicable,
    collective_time,
    comm_group,
    send_recv_time,
)
from simcluster.perf.collectives_calibration import LinkCost, match_class, parse_class
from simcluster.perf.collectives_group import nic_share_Bps
from simcluster.spec import load_topology

GiB = 2**30
MiB = 2**20
A100 = load_topology("dgx-a100-80gb")
H100 = load_topology("dgx-h100")
TOPOLOGIES = ("dgx-a100-80gb", "dgx-h100", "dgx-b200", "gb200-nvl72", "box-2x3090ti-pcie",
              "box-4x3090ti-nvlink", "rtx-4090-8x-pcie")


# --- raw formula oracles (Thakur et al. 2005; nccl-tests PERFORMANCE.md) --------------------

def test_ring_allreduce_oracle() -> None:
    t = f.ring_allreduce_time_s(GiB, 8, 100e9, 5e-6)
    assert t == pytest.approx(2 * 7 / 8 * GiB / 100e9 + 2 * 7 * 5e-6, rel=1e-12)
    assert round(t * 1e3, 3) == 18.860


def test_ring_reduce_scatter_all_gather_oracle() -> None:
    t = f.ring_allgather_time_s(GiB, 8, 100e9, 5e-6)
    assert t == pytest.approx(7 / 8 * GiB / 100e9 + 7 * 5e-6, rel=1e-12)


@pytest.mark.parametrize("passes", [1, 2])
def test_two_level_ring_on_one_node_is_the_ring(passes: int) -> None:
    flat = f.ring_two_level_time_s(GiB, 8, 1, passes, 100e9, 5e-6, 99.0)
    one = (f.ring_allreduce_time_s if passes == 2 else f.ring_allgather_time_s)(GiB, 8, 100e9, 5e-6)
    assert flat == pytest.approx(one, rel=1e-12)


def test_two_level_ring_counts_node_crossings() -> None:
    # 4 nodes x 8: 2*(32-1) = 62 steps, 2*(4-1) = 6 of them cross nodes (NCCL nInterSteps)
    t = f.ring_two_level_time_s(0.0, 32, 4, 2, 1e9, 1e-6, 10e-6)
    assert t == pytest.approx(56 * 1e-6 + 6 * 10e-6, rel=1e-12)


def test_rabenseifner_oracle() -> None:
    assert f.rabenseifner_allreduce_time_s(GiB, 8, 100e9, 5e-6) == pytest.approx(
        2 * 3 * 5e-6 + 2 * 7 / 8 * GiB / 100e9, rel=1e-12)
    # p = 6, not a power of two: (2*floor(lg 6) + 2) alpha + (2(p-1)/p + 2) S beta
    assert f.rabenseifner_allreduce_time_s(GiB, 6, 100e9, 5e-6) == pytest.approx(
        6 * 5e-6 + (2 * 5 / 6 + 2) * GiB / 100e9, rel=1e-12)


def test_recursive_doubling_and_bruck_oracles() -> None:
    assert f.recursive_halving_time_s(GiB, 16, 100e9, 5e-6) == pytest.approx(
        4 * 5e-6 + 15 / 16 * GiB / 100e9, rel=1e-12)
    assert f.bruck_allgather_time_s(GiB, 12, 100e9, 5e-6) == pytest.approx(
        4 * 5e-6 + 11 / 12 * GiB / 100e9, rel=1e-12)  # ceil(lg 12) = 4 rounds


def test_all_to_all_oracles() -> None:
    assert f.pairwise_all_to_all_time_s(GiB, 8, 100e9, 5e-6) == pytest.approx(
        7 * 5e-6 + 7 / 8 * GiB / 100e9, rel=1e-12)
    assert f.bruck_all_to_all_time_s(GiB, 8, 100e9, 5e-6) == pytest.approx(
        3 * 5e-6 + GiB / 2 * 3 / 100e9, rel=1e-12)


def test_broadcast_and_tree_oracles() -> None:
    assert f.ring_broadcast_time_s(GiB, 8, 1e11, 5e-6) == pytest.approx(35e-6 + GiB / 1e11)
    assert f.binomial_broadcast_time_s(GiB, 8, 1e11, 5e-6) == pytest.approx(3 * (5e-6 + GiB / 1e11))
    assert f.scatter_allgather_broadcast_time_s(GiB, 8, 1e11, 5e-6) == pytest.approx(
        6 * 5e-6 + 2 * 7 / 8 * GiB / 1e11)
    assert f.tree_allreduce_time_s(GiB, 16, 8, 1e11, 1e-6, 10e-6) == pytest.approx(
        2 * 4 * 10e-6 + 2 * 7 * 1e-6 + 2 * GiB / 1e11)


def test_hierarchical_is_rs_ar_ag() -> None:
    t = f.hierarchical_allreduce_time_s(GiB, 4, 8, 200e9, 25e9, 1e-6, 10e-6)
    expect = (2 * f.ring_allgather_time_s(GiB, 8, 200e9, 1e-6)
              + f.ring_allreduce_time_s(GiB / 8, 4, 25e9, 10e-6))
    assert t == pytest.approx(expect, rel=1e-12)


def test_rhd_two_level_reduces_to_one_level() -> None:
    one = f.recursive_halving_time_s(GiB, 8, 1e11, 5e-6)
    assert f.rhd_two_level_time_s(GiB, 1, 8, 1e11, 1.0, 5e-6, 9.0) == pytest.approx(one)
    assert f.rhd_two_level_time_s(GiB, 8, 1, 1.0, 1e11, 9.0, 5e-6) == pytest.approx(one)


@pytest.mark.parametrize(("op", "factor"), [("all_reduce", 1.75), ("all_gather", 0.875),
                                            ("reduce_scatter", 0.875), ("all_to_all", 0.875),
                                            ("broadcast", 1.0), ("send_recv", 1.0)])
def test_bus_factors(op: str, factor: float) -> None:
    assert f.bus_factor(op, 8) == factor


@given(n=st.integers(2, 1024), bw=st.floats(1e9, 1e12))
def test_ring_busbw_is_independent_of_n(n: int, bw: float) -> None:
    size = 2.0**40
    t = f.ring_allreduce_time_s(size, n, bw, 5e-6)
    assert 2 * (n - 1) / n * size / t == pytest.approx(bw, rel=0.01)


# --- group placement ---------------------------------------------------------------------------

def test_tp_group_on_one_node() -> None:
    g = comm_group(A100, 8, 1)
    assert (g.n, g.nodes, g.ranks_per_node, g.inter, g.nvls) == (8, 1, 8, None, False)
    assert g.intra is not None
    assert g.intra.link_class == "nvlink3-nvswitch"
    assert g.intra.line_Bps == 300e9


def test_dp_group_one_rank_per_node_gets_one_nic_share() -> None:
    g = comm_group(H100, 4, 8)
    assert (g.nodes, g.ranks_per_node, g.intra) == (4, 1, None)
    assert g.inter is not None
    assert g.inter.link_class == "ib-ndr-400"
    assert g.inter.line_Bps == nic_share_Bps(H100) == 50e9


def test_strided_group_spans_nodes() -> None:
    g = comm_group(A100, 16, 2)  # tp=2 -> DP ranks 0, 2, ..., 30: 4 per node on 4 nodes
    assert (g.n, g.nodes, g.ranks_per_node) == (16, 4, 4)


def test_nvl_domain_is_one_scale_up_node() -> None:
    g = comm_group(load_topology("gb200-nvl72"), 32, 1)
    assert (g.nodes, g.nvls, g.inter) == (1, True, None)


def test_nvlink_bridge_only_inside_a_bridge_pair() -> None:
    box = load_topology("box-4x3090ti-nvlink")
    pair, four = comm_group(box, 2, 1), comm_group(box, 4, 1)
    assert pair.intra is not None
    assert four.intra is not None
    assert pair.intra.link_class == "nvlink-bridge-ga102"
    assert four.intra.link_class == "pcie4"


def test_pcie_switch_uplink_is_shared() -> None:
    box = load_topology("rtx-4090-8x-pcie")  # 4 GPUs behind each PCIe switch, 2 sockets
    assert box.host.gpus_per_pcie_switch == 4
    g = comm_group(box, 8, 1)
    assert g.intra is not None
    assert g.intra.line_Bps == pytest.approx(box.host.pcie_Bps / 4)


def test_class_matching_by_line_rate() -> None:
    assert match_class("scale_out", "nic", 12.5e9).name == "ethernet-100g"
    assert match_class("scale_out", "nic", 25e9).name == "ib-hdr-200"
    assert match_class("scale_up", "nvswitch", 900e9).name == "nvlink5-nvswitch"
    with pytest.raises(SpecError, match="no collective calibration"):
        match_class("scale_up", "hyperlink", 1e9)


@pytest.mark.parametrize(("size", "stride"), [(0, 1), (2, 0)])
def test_bad_group_shapes(size: int, stride: int) -> None:
    with pytest.raises(SpecError):
        comm_group(A100, size, stride)


def test_bad_calibration_entry() -> None:
    with pytest.raises(SpecError, match="layer"):
        parse_class("x", {"layer": "sideways"})


# --- tuner and API -----------------------------------------------------------------------------

def test_auto_is_the_fastest_applicable_algorithm() -> None:
    for group in (comm_group(H100, 8, 1), comm_group(H100, 32, 1), comm_group(A100, 4, 8)):
        for op in OPS[:-1]:
            for size in (4e3, 4e6, 4e9):
                auto = collective_time(op, size, group)
                explicit = [collective_time(op, size, group, a).time_s
                            for a in AUTO_ALGOS[op] if applicable(op, a, group)]
                assert auto.time_s == min(explicit)


def test_nccl_like_choices() -> None:
    assert collective_time("all_reduce", GiB, comm_group(H100, 8, 1)).algorithm == "nvls"
    assert collective_time("all_reduce", GiB, comm_group(A100, 8, 1)).protocol == "Simple"
    assert collective_time("all_reduce", 1024, comm_group(A100, 8, 1)).protocol == "LL"


def test_busbw_definition() -> None:
    r = collective_time("all_gather", GiB, comm_group(A100, 8, 1))
    assert r.algbw_Bps == pytest.approx(GiB / r.time_s)
    assert r.busbw_Bps == pytest.approx(r.algbw_Bps * 7 / 8)


def test_trivial_collectives_cost_nothing() -> None:
    assert collective_time("all_reduce", GiB, comm_group(A100, 1, 1)).time_s == 0.0
    assert collective_time("all_reduce", 0, comm_group(A100, 8, 1)).time_s == 0.0


@pytest.mark.parametrize(("op", "algo"), [("all_reduce", "nvls"), ("all_reduce", "hierarchical"),
                                          ("all_reduce", "pairwise"), ("gather", "auto"),
                                          ("all_reduce", "magic")])
def test_bad_requests(op: str, algo: str) -> None:
    with pytest.raises(SpecError):
        collective_time(op, GiB, comm_group(A100, 8, 1), algo)


def test_negative_size() -> None:
    with pytest.raises(SpecError, match="nbytes"):
        collective_time("all_reduce", -1.0, comm_group(A100, 8, 1))


def test_send_recv() -> None:
    inter = send_recv_time(64 * MiB, H100, inter_node=True)
    intra = send_recv_time(64 * MiB, H100, inter_node=False)
    assert inter.algorithm == intra.algorithm == "p2p"
    assert inter.time_s > intra.time_s
    assert inter.busbw_Bps == inter.algbw_Bps
    assert 40e9 < send_recv_time(4 * GiB, H100, inter_node=True).busbw_Bps <= 47.5e9


def test_every_algo_is_exported() -> None:
    assert set(ALGOS) == {"auto"} | {a for algos in OP_ALGOS.values() for a in algos}


# --- properties on the calibrated model --------------------------------------------------------

def _all_algos(group: CommGroup) -> list[tuple[str, str]]:
    return [(op, a) for op in OPS for a in OP_ALGOS[op] if applicable(op, a, group)]


def _groups() -> list[CommGroup]:
    shapes = [(8, 1), (2, 1), (16, 1), (4, 8), (16, 2)]
    out = []
    for name in TOPOLOGIES:
        topo = load_topology(name)
        out += [comm_group(topo, n, s) for n, s in shapes if n * s <= 64]
    return out


GROUPS = _groups()


@given(index=st.integers(0, len(GROUPS) - 1), a=st.floats(1.0, 2.0**36), b=st.floats(1.0, 2.0**36))
def test_time_is_monotone_in_size(index: int, a: float, b: float) -> None:
    group = GROUPS[index]
    small, large = min(a, b), max(a, b)
    for op, algo in _all_algos(group):
        if op == "send_recv" and group.n != 2:
            continue
        assert (collective_time(op, small, group, algo).time_s
                <= collective_time(op, large, group, algo).time_s)


def _faster(cost: LinkCost | None) -> LinkCost | None:
    if cost is None:
        return None
    double = [dataclasses.replace(p, bandwidth_Bps=2 * p.bandwidth_Bps) for p in cost.protocols]
    nvls = (dataclasses.replace(cost.nvls, bandwidth_Bps=2 * cost.nvls.bandwidth_Bps)
            if cost.nvls else None)
    return dataclasses.replace(cost, protocols=tuple(double), nvls=nvls)


@given(index=st.integers(0, len(GROUPS) - 1), size=st.floats(1.0, 2.0**36),
       layer=st.sampled_from(["intra", "inter", "both"]))
def test_doubling_bandwidth_never_slows(index: int, size: float, layer: str) -> None:
    group = GROUPS[index]
    fast = dataclasses.replace(
        group, intra=_faster(group.intra) if layer != "inter" else group.intra,
        inter=_faster(group.inter) if layer != "intra" else group.inter)
    for op, algo in [(op, "auto") for op in OPS[:-1]] + _all_algos(group):
        if op == "send_recv" and group.n != 2:
            continue
        assert (collective_time(op, size, fast, algo).time_s
                <= collective_time(op, size, group, algo).time_s)


@given(nodes=st.integers(1, 128))
def test_calibrated_ring_busbw_is_flat_in_nodes(nodes: int) -> None:
    # Non-blocking fat tree: large-message ring busbw = min(NVLink, 8 NIC shares) at any scale.
    size = 2.0**38
    ref = collective_time("all_reduce", size, comm_group(A100, 16, 1), "ring").busbw_Bps
    got = collective_time("all_reduce", size, comm_group(A100, 8 * max(nodes, 2), 1), "ring")
    assert got.busbw_Bps == pytest.approx(ref, rel=0.01)
    assert math.isfinite(got.time_s)


def test_every_calibration_class_carries_its_source() -> None:
    """Each link class of catalog/collectives.yaml keeps the citation it was fitted from (shown
    by `simcluster catalog` and docs/collectives.md): a non-empty text naming a publication."""
    from simcluster.perf.collectives_calibration import link_classes

    for link in link_classes():
        assert isinstance(link.source, str), link.name
        assert len(link.source) > 10, link.name
