"""Expert tensor parallelism and MoE parallel folding (issue 23: the sweep searches expert TP).

Megatron-Core's expert grid (``megatron/core/parallel_state.py``: the expert rank generator,
order ``tp-ep-dp-pp`` with the expert TP size) and alltoall dispatcher
(``moe/token_dispatcher.py``: the all-to-all over the EP group, then the received rows gathered
over the expert-TP group). Oracles by hand on Qwen3-30B-A3B (hidden 2048, expert FFN 768, 128
experts, top-8, no shared expert); properties: the expert FLOPs and the expert weights a stage
holds do not depend on how the experts are split, only where they sit.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf import comm_plan
from simcluster.perf.collectives import collective_time
from simcluster.perf.memory_stage import all_stage_params
from simcluster.perf.stage_work import scenario_layer_times
from simcluster.report.html_sweep import layout as html_layout
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario
from simcluster.sweep.report import layout_text
from simcluster.sweep.rerank import layout_of

H, K, B, S = 2048, 8, 1, 4096  # Qwen3-30B-A3B's hidden size and top-k; micro-batch, sequence


def qwen(tp: int, ep: int, expert_tp: int | None = None, nodes: int = 2,
         **par: Any) -> Scenario:
    """Qwen3-30B-A3B in bf16 on ``nodes`` DGX H100, micro-batch 1 at 4096 tokens."""
    layout = {"tp": tp, "ep": ep, "expert_tp": expert_tp, "micro_batch": B,
              "global_batch": 64, "sequence_parallel": tp > 1, **par}
    return load_scenario({"model": "qwen3-30b-a3b", "precision": "bf16",
                          "cluster": {"topology": "dgx-h100", "nodes": nodes},
                          "parallelism": layout})


# Placement and the loader's rules ------------------------------------------------------------

def test_expert_tp_one_folds_the_ep_group_over_the_tp_ranks() -> None:
    """TP2 EP16 on 16 GPUs: DP is 8, so EP 16 > DP x CP needs whole experts per GPU; its EP group
    then strides 1 (expert TP) and spans both nodes, while the default's strides 2."""
    s = qwen(2, 16, 1)
    par = s.parallelism
    assert (par.etp, par.expert_dp) == (1, 1)
    g = comm_plan.groups(s)
    assert g.ep is not None
    assert g.etp is None
    assert g.ep == comm_plan.comm_group(s.cluster.topology, 16, 1)
    default = qwen(2, 8)
    assert default.parallelism.etp == 2
    assert default.parallelism.expert_dp == 1
    assert comm_plan.groups(default).ep == comm_plan.comm_group(s.cluster.topology, 8, 2)


def test_ep_larger_than_dp_needs_expert_tp_one() -> None:
    with pytest.raises(SpecError) as err:
        qwen(2, 16)
    assert err.value.key == "parallelism.ep"
    assert "expert_tp*ep = 2*16 must divide tp*cp*dp = 16" in err.value.message


@pytest.mark.parametrize(("model", "layout", "key", "words"), [
    ("llama-3-8b", {"tp": 2, "expert_tp": 1, "sequence_parallel": True},
     "parallelism.expert_tp", "needs a mixture-of-experts model"),
    ("qwen3-30b-a3b", {"tp": 2, "ep": 4}, "parallelism.sequence_parallel",
     "needs sequence_parallel: true"),
    ("qwen3-30b-a3b", {"tp": 1, "expert_tp": 16, "ep": 1}, "parallelism.expert_tp",
     "16 does not divide the 8 GPUs of one scale-up domain"),
])
def test_refusals_name_the_key(model: str, layout: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        load_scenario({"model": model, "cluster": {"topology": "dgx-h100", "nodes": 2},
                       "parallelism": {"global_batch": 64, **layout}})
    assert err.value.key == key
    assert words in err.value.message


# Communication --------------------------------------------------------------------------------

def test_expert_tp_gathers_the_routed_copies_oracle() -> None:
    """TP2 EP8 with the experts split like TP: each rank routes its 2048 tokens; the all-to-all
    sends their 8 copies (2048 x 8 x 2048 x 2 B = 64 MiB) and the expert-TP group then gathers
    both ranks' received rows (128 MiB gathered, reduce-scattered back), forward and backward."""
    s = qwen(2, 8)
    g = comm_plan.groups(s)
    assert g.ep is not None
    assert g.etp is not None
    sent = (S // 2) * K * H * 2
    one = (2 * collective_time("all_to_all", sent, g.ep).time_s
           + collective_time("all_gather", 2 * sent, g.etp).time_s
           + collective_time("reduce_scatter", 2 * sent, g.etp).time_s)
    assert comm_plan.ep_layer_comm_s(s, g) == pytest.approx((one, one), rel=1e-12)


def test_whole_experts_keep_only_the_attention_tp_pair() -> None:
    """Qwen3-30B-A3B has no shared expert and no dense block: a MoE block's TP group gathers and
    scatters only around the attention, half a dense block's TP communication."""
    s = qwen(2, 16, 1)
    assert comm_plan.tp_pair_share(s) == 0.5
    dense = load_scenario({"model": "llama-3-8b", "cluster": {"topology": "dgx-h100", "nodes": 2},
                           "parallelism": {"tp": 2, "global_batch": 64,
                                           "sequence_parallel": True}})
    assert comm_plan.tp_pair_share(dense) == 1.0


# Compute and memory -------------------------------------------------------------------------------

def _expert_ops(s: Scenario) -> dict[str, Any]:
    return {o.name: o for o in scenario_layer_times(s).operators if o.name.startswith("mlp_")}


def test_expert_gemm_shapes_oracle() -> None:
    """Each GPU's grouped GEMMs: 128/EP local experts of ``etp x 2048 x 8 / (128/EP)`` rows
    (the expert-TP group's gathered rows) at ``768 / etp`` columns: the same FLOPs per GPU split
    like TP (EP8) or whole (EP16 over both TP ranks), ``2 x 2048 x 8 x 2048 x 768`` per GEMM."""
    per_gemm = 2 * (S // 2) * K * H * 768
    for s in (qwen(2, 8), qwen(2, 16, 1)):
        ops = _expert_ops(s)
        for name in ("mlp_gate", "mlp_up", "mlp_down"):
            assert ops[name].flops == pytest.approx(per_gemm, rel=1e-12), (name, s.parallelism)
        assert ops["mlp_up"].launches == 128 / s.parallelism.ep


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([(1, 1), (1, 8), (2, 1), (2, 8), (2, 16), (4, 4), (4, 16)]),
       st.booleans())
def test_split_of_the_experts_moves_weights_not_totals(tp_ep: tuple[int, int],
                                                       whole: bool) -> None:
    """Property: whatever the expert TP, a GPU runs the same expert FLOPs, and ``expert_tp x ep``
    GPUs hold one copy of the stage's experts between them."""
    tp, ep = tp_ep
    assume(whole or ep * tp <= 16)  # EP > DP x CP: only whole experts fold over the TP ranks
    s = qwen(tp, ep, 1 if whole else None)
    par = s.parallelism
    ops = _expert_ops(s)
    assert ops["mlp_up"].flops == pytest.approx(2 * (S / tp) * K * H * 768, rel=1e-12)
    expert = all_stage_params(s.model, par)[0].expert
    copy = expert * par.etp * par.ep
    reference = all_stage_params(s.model, qwen(1, 1).parallelism)[0].expert
    assert copy == pytest.approx(reference, rel=1e-12)
    assert par.expert_dp * par.etp * par.ep == par.tp * par.cp * par.dp


# Sweep rows -----------------------------------------------------------------------------------

ROW: dict[str, Any] = {"tp": 2, "pp": 8, "cp": 1, "dp": 16, "ep": 32, "micro_batch": 1,
                       "schedule": "1f1b", "virtual_stages": 1, "recompute": "none",
                       "sequence_parallel": True, "zero_stage": 1, "tp_across_nodes": False,
                       "offload": "none", "stage_layers": "", "expert_tp": 1}


def test_layout_labels_name_an_expert_split_unlike_tp() -> None:
    assert layout_text(ROW) == "tp2 pp8 ep32 etp1 dp16 mb1 1f1b none sp z1"
    assert "etp" not in layout_text({**ROW, "expert_tp": 2})
    assert html_layout(ROW) == "tp2 pp8 cp1 dp16 ep32 etp1 mb1 1f1b z1 none sp"
    assert "etp" not in html_layout({**ROW, "expert_tp": None})


def test_rows_stored_before_expert_tp_rerank_at_tps_split() -> None:
    old = {k: v for k, v in ROW.items() if k not in ("expert_tp", "offload")}
    assert layout_of(old)["expert_tp"] is None
    assert layout_of(old)["offload"] == "none"
    assert layout_of({**ROW, "expert_tp": "1"})["expert_tp"] == 1
