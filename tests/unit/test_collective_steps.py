"""One table of NCCL latency steps (perf/collectives_formulas.phase_steps) for Tier A and Tier B.

Step counts by hand from NCCL tuning.cc: ring ``passes*(n-1)`` steps of which
``passes*(nodes-1)`` cross nodes; tree ``2(ppn-1)`` intra and ``2*ceil(lg nodes)`` inter;
hierarchical = ring reduce-scatter in the node, ring all-reduce across nodes, ring all-gather.
"""

from __future__ import annotations

import pytest

from simcluster.errors import InvariantError
from simcluster.perf import collectives_formulas as f

A_INTRA, A_INTER = 1e-6, 1e-3  # distinct per-step latencies, so each count shows in the sum


def test_tier_a_closed_forms_use_the_table_counts() -> None:
    """Zero bytes leaves only the latency: the table's counts times the per-step latencies."""
    # 5 nodes of 8: tree 2*7 = 14 intra steps, 2*ceil(lg 5) = 6 inter steps
    assert f.tree_allreduce_time_s(0.0, 5, 8, 1e9, A_INTRA, A_INTER) == \
        pytest.approx(14 * A_INTRA + 6 * A_INTER, rel=1e-12)
    # 32 ranks on 4 nodes, all-reduce ring: 2*31 = 62 steps, 2*3 = 6 cross nodes
    assert f.ring_two_level_time_s(0.0, 32, 4, 2, 1e9, A_INTRA, A_INTER) == \
        pytest.approx(56 * A_INTRA + 6 * A_INTER, rel=1e-12)
    assert f.phase_steps("all_reduce", "tree", 40, 5, 8) == [(14, 6)]
    assert f.phase_steps("all_reduce", "ring", 32, 4, 8) == [(56, 6)]


def test_hierarchical_is_three_rings() -> None:
    # 4 nodes of 8: reduce-scatter 7 steps in the node, all-reduce 2*3 across, all-gather 7
    assert f.phase_steps("all_reduce", "hierarchical", 32, 4, 8) == [(7, 0), (0, 6), (7, 0)]
    latency = f.hierarchical_allreduce_time_s(0.0, 4, 8, 1e9, 1e9, A_INTRA, A_INTER)
    assert latency == pytest.approx(14 * A_INTRA + 6 * A_INTER, rel=1e-12)


def test_pairwise_and_p2p_steps() -> None:
    assert f.phase_steps("all_to_all", "pairwise", 32, 4, 8) == [(7, 24)]
    assert f.phase_steps("send_recv", "p2p", 2, 2, 1) == [(0, 1)]
    assert f.phase_steps("send_recv", "p2p", 2, 1, 2) == [(1, 0)]
    assert f.phase_steps("broadcast", "ring", 32, 4, 8) == [(28, 3)]


def test_algorithms_without_a_step_table_are_internal_errors() -> None:
    """Binomial broadcast and the recursive algorithms are not in the shared table."""
    with pytest.raises(InvariantError, match="tree"):
        f.phase_steps("broadcast", "tree", 8, 1, 8)
    with pytest.raises(InvariantError, match="rhd"):
        f.phase_steps("all_reduce", "rhd", 8, 1, 8)
