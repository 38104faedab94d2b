"""Context parallelism: causal load balance and the K/V exchange type (p2p ring or all-gather).

Oracles: the busiest rank's share of its ``s/cp x s`` score rectangle counted by hand (pairs
under the causal mask, Dubey et al. 2024 section 3.3.2 for the balanced split), and the
all-gather's array size from the model's shape; both engines must answer to both keys.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.kernels.attention import causal_cp_fraction
from simcluster.run.single import simulate
from simcluster.spec import Scenario, load_scenario
from tests.tiny import tiny_scenario

ENGINES = ["analytical", "des"]


def _pairs_of_busiest_rank(cp: int, chunk: int) -> Fraction:
    """Count the causal (query, key) pairs of the last of ``cp`` contiguous chunks by hand and
    return them as a share of the ``chunk x cp*chunk`` rectangle."""
    start = (cp - 1) * chunk
    pairs = sum(start + i + 1 for i in range(chunk))  # query start+i sees keys 0..start+i
    return Fraction(pairs, chunk * cp * chunk)


def test_contiguous_chunks_leave_the_last_rank_almost_its_whole_rectangle() -> None:
    assert causal_cp_fraction(8, load_balance=False) == pytest.approx(15 / 16)
    assert causal_cp_fraction(2, load_balance=False) == pytest.approx(3 / 4)
    assert causal_cp_fraction(8, load_balance=True) == 0.5
    assert causal_cp_fraction(1, load_balance=False) == 0.5
    # the count converges to 1 - 1/(2cp) as the chunk grows (the diagonal's half-pairs vanish)
    assert float(_pairs_of_busiest_rank(4, 4096)) == pytest.approx(1 - 1 / 8, abs=1e-4)


@given(cp=st.integers(1, 1024))
def test_unbalanced_share_is_between_half_and_one_and_grows_with_cp(cp: int) -> None:
    share = causal_cp_fraction(cp, load_balance=False)
    assert 0.5 <= share < 1.0
    assert causal_cp_fraction(cp + 1, load_balance=False) > share
    assert causal_cp_fraction(cp, load_balance=True) == 0.5


def _scenario(**execution: Any) -> Scenario:
    """Tiny model with 8 KV heads, TP 2 x CP 2 over 2 DGX A100 nodes, flash attention, causal."""
    data = tiny_scenario("cp", parallelism={"tp": 2, "cp": 2, "global_batch": 64},
                         execution={"flash_attention": True, **execution})
    data["model"] = {**data["model"], "kv_heads": 8, "seq_len": 8192}
    return load_scenario(data)


def test_all_gather_exchange_moves_the_whole_sequence_kv() -> None:
    s = _scenario(cp_comm_type="all_gather")
    g = comm_plan.groups(s)
    assert g.cp is not None
    assert g.cp.n == 2
    # K and V: 2 x b(1) x s(8192) x kv_heads(8) x head_dim(64) / tp(2), bf16 = 2 x 4,194,304 B
    whole = 2 * 1 * 8192 * 8 * 64 / 2 * 2
    forward, backward = comm_plan.cp_layer_comm_s(s, g, attention_fwd_s=1.0)
    assert forward == collective_time("all_gather", whole, g.cp).time_s  # exposed: no overlap
    assert backward == collective_time("reduce_scatter", whole, g.cp).time_s
    # the ring hides the same exchange behind a long attention
    assert comm_plan.cp_layer_comm_s(_scenario(), g, attention_fwd_s=1.0) == (0.0, 0.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_answer_to_the_cp_keys(engine: str) -> None:
    def step_s(**execution: Any) -> float:
        return simulate(_scenario(**execution), engine=engine).step.iteration_time_s

    base = step_s()
    assert step_s(cp_load_balance=False) > base
    assert step_s(cp_comm_type="all_gather") > base
