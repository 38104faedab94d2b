"""Issue 13's memory overheads: oracles with hand-computed numbers, the execution keys, properties.

Each term's source is in :mod:`simcluster.perf.memory_overheads`; here the numbers are worked out
by hand from those sources and compared with the model's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf.memory import estimate_memory, grad_bytes_of
from simcluster.perf.memory_overheads import (
    DEFAULT_ALLOCATOR_FRAGMENTATION,
    DEFAULT_CUDA_CONTEXT,
    DEFAULT_NCCL_BUFFSIZE,
    Communicators,
    communicators,
    nccl_bytes,
)
from simcluster.perf.step import estimate_step
from simcluster.run.single import simulate
from simcluster.spec.execution import ExecutionSpec
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario

MiB = 2**20
GPT3_175B = "scenarios/gpt3-175b-1024xa100.yaml"


def small(execution: dict[str, Any] | None = None, precision: str = "bf16",
          **par: object) -> Scenario:
    """GPT-3 1.7B (h 2304, V 51200, s 2048, tied) on 2 DGX A100 80GB nodes."""
    parallelism: dict[str, object] = {"global_batch": 64, **par}
    return load_scenario({"model": "gpt3-1.7b", "precision": precision,
                          "execution": execution or {},
                          "cluster": {"topology": "dgx-a100-80gb", "nodes": 2},
                          "parallelism": parallelism})


# Defaults: the spec's literals are the cited constants -------------------------------------------


def test_execution_defaults_are_the_cited_constants() -> None:
    ex = ExecutionSpec()
    assert ex.cuda_context_bytes == DEFAULT_CUDA_CONTEXT == 666_632_192 + 2 * 32 * MiB
    assert ex.nccl_buffsize_bytes == DEFAULT_NCCL_BUFFSIZE == 4 * MiB
    assert ex.allocator_fragmentation == DEFAULT_ALLOCATOR_FRAGMENTATION == 0.15
    assert ex.fp32_grad_buffer is None
    assert ex.fp32_grad_copy == "none"


# 1. CUDA context --------------------------------------------------------------------------------


def test_cuda_context_on_every_stage_and_refinable() -> None:
    s = small(tp=2, pp=2)
    for stage in estimate_memory(s).stages:
        assert stage.overheads.cuda_context == 733_741_056
    one = small({"cuda_context_GiB": 1}, tp=2, pp=2)
    before, after = estimate_memory(s).stages[1], estimate_memory(one).stages[1]
    assert after.total_bytes - before.total_bytes == pytest.approx(2**30 - 733_741_056)


# 2. NCCL buffers ----------------------------------------------------------------------------------


def test_communicators_of_the_gpt3_175b_layout() -> None:
    """TP 8, PP 16, DP 8, tied embeddings: tp, dp, pp and tp*pp groups (> 2 ranks) everywhere, the
    2-rank embedding group on the first and last stage only."""
    s = load_scenario(GPT3_175B)
    assert communicators(s, 0) == Communicators(pairs=1, large=4, a2a_peers=0)
    assert communicators(s, 7) == Communicators(pairs=0, large=4, a2a_peers=0)
    assert communicators(s, 15) == Communicators(pairs=1, large=4, a2a_peers=0)
    est = estimate_memory(s)
    assert est.stages[0].overheads.nccl == (4 * 688 + 544) * MiB
    assert est.stages[7].overheads.nccl == 4 * 688 * MiB


def test_communicators_small_layouts() -> None:
    # 16 GPUs, tp 2: tp pair, dp 8, tp*pp pair
    assert communicators(small(tp=2), 0) == Communicators(pairs=2, large=1, a2a_peers=0)
    # tp 1, pp 1: the data-parallel group alone
    assert communicators(small(), 0) == Communicators(pairs=0, large=1, a2a_peers=0)
    # cp 2 (dp 8 -> dp 4, dp*cp 8): the CP pair joins
    assert communicators(small(cp=2), 0) == Communicators(pairs=1, large=1, a2a_peers=0)


def test_expert_parallel_all_to_all_counts_every_peer() -> None:
    s = load_scenario({"model": "mixtral-8x7b", "cluster": {"topology": "dgx-h100", "nodes": 2},
                       "parallelism": {"global_batch": 64, "tp": 2, "ep": 4,
                                       "sequence_parallel": True}})
    # tp 2 pair, tp*pp 2 pair; dp 8, ep 4 large; expert-dp 8/4 = 2 pair; 3 all-to-all peers
    assert communicators(s, 0) == Communicators(pairs=3, large=2, a2a_peers=3)
    expected = 3 * 544 * MiB + 2 * 688 * MiB + 3 * 3.28e9 / 7
    assert estimate_memory(s).stages[0].overheads.nccl == pytest.approx(expected)


def test_nccl_bytes_scale_with_the_buffer_size() -> None:
    """Per channel and peer: SIMPLE NCCL_BUFFSIZE + LL128 4,915,200 B + LL 524,288 B."""
    comms = Communicators(pairs=1, large=1, a2a_peers=0)
    per_default = 4 * MiB + 4_915_200 + 524_288
    per_8 = 8 * MiB + 4_915_200 + 524_288
    assert nccl_bytes(comms, 4 * MiB) == (544 + 688) * MiB
    assert nccl_bytes(comms, 8 * MiB) == pytest.approx((544 + 688) * MiB * per_8 / per_default)
    s = small({"nccl_buffsize_bytes": 8 * MiB})
    assert estimate_memory(s).stages[0].overheads.nccl == pytest.approx(
        688 * MiB * per_8 / per_default)


# 3. Framework gradient buffers --------------------------------------------------------------------


def test_fp32_grad_buffer_default_follows_megatron() -> None:
    assert grad_bytes_of(small()) == 4  # bf16: fp32 main grads
    assert grad_bytes_of(small(precision="fp16")) == 2
    assert grad_bytes_of(small({"fp32_grad_buffer": True}, precision="fp16")) == 4
    assert grad_bytes_of(small({"fp32_grad_buffer": False})) == 2
    assert grad_bytes_of(small({"fp32_grad_buffer": False}, precision="fp32")) == 4


def test_fp32_grad_buffer_sets_grad_memory_and_dp_traffic() -> None:
    """ZeRO-1, pp 1: grads are params x bytes; the DP reduction carries the same width."""
    bf16, half = small(), small({"fp32_grad_buffer": False})
    a, b = estimate_memory(bf16).stages[0], estimate_memory(half).stages[0]
    assert a.grads_bytes == 2 * b.grads_bytes
    assert a.weights_bytes == b.weights_bytes
    assert a.optimizer_bytes == b.optimizer_bytes
    assert estimate_step(bf16).dp_total_s > estimate_step(half).dp_total_s


def test_fp32_grad_copy_shard_and_full() -> None:
    """DeepSpeed: ZeRO-1 fp32 gradient partition 4/dp per parameter (dp 16); BF16_Optimizer's
    full fp32 gradients 4 per parameter."""
    base = small({"fp32_grad_buffer": False}, precision="fp16")
    params = estimate_memory(base).stages[0].weights_bytes / 2
    shard = small({"fp32_grad_buffer": False, "fp32_grad_copy": "shard"}, precision="fp16")
    full = small({"fp32_grad_buffer": False, "fp32_grad_copy": "full"})
    g0 = estimate_memory(base).stages[0].grads_bytes
    assert estimate_memory(shard).stages[0].grads_bytes == pytest.approx(g0 + params * 4 / 16)
    assert estimate_memory(full).stages[0].grads_bytes == pytest.approx(g0 + params * 4)
    zero0 = small({"fp32_grad_copy": "shard"}, zero_stage=0)
    plain0 = small(zero_stage=0)
    assert (estimate_memory(zero0).stages[0].grads_bytes
            == pytest.approx(estimate_memory(plain0).stages[0].grads_bytes + params * 4))


# 4. Logits and embedding gradient -----------------------------------------------------------------


def test_logits_on_the_last_stage_embedding_gradient_on_the_first() -> None:
    """tp 2, pp 2, micro-batch 2: logits (2 + 4) * s*b*V/t = 6*2048*2*51200/2 B; embedding
    gradient 2*V*h/t = 2*51200*2304/2 B."""
    est = estimate_memory(small(tp=2, pp=2, micro_batch=2))
    first, last = est.stages[0].overheads, est.stages[1].overheads
    assert last.logits == 6 * 2048 * 2 * 51200 / 2 == 629_145_600
    assert first.embedding_grad == 2 * 51200 * 2304 / 2 == 117_964_800
    assert first.logits == 0
    assert last.embedding_grad == 0


def test_logits_in_fp32_training_and_with_context_parallelism() -> None:
    fp32 = estimate_memory(small(precision="fp32")).stages[0].overheads
    assert fp32.logits == 4 * 2048 * 1 * 51200
    assert fp32.embedding_grad == 4 * 51200 * 2304
    cp = estimate_memory(small(cp=2)).stages[0].overheads
    assert cp.logits == 6 * 1024 * 1 * 51200


# 5. Allocator reserve -----------------------------------------------------------------------------


def test_allocator_reserve_is_reserved_minus_allocated_of_the_dynamic_part() -> None:
    st = estimate_memory(small(tp=2)).stages[0]
    o = st.overheads
    dynamic = st.activations_bytes + o.logits + o.embedding_grad
    assert o.allocator == pytest.approx(dynamic * 0.15 / 0.85)
    assert (dynamic + o.allocator) * (1 - 0.15) == pytest.approx(dynamic)  # reserved*(1-f) = alloc
    none = estimate_memory(small({"allocator_fragmentation": 0}, tp=2)).stages[0]
    assert none.overheads.allocator == 0
    assert st.total_bytes - none.total_bytes == pytest.approx(o.allocator)


@pytest.mark.parametrize(("key", "value"), [
    ("allocator_fragmentation", 0.95), ("allocator_fragmentation", -0.1),
    ("fp32_grad_copy", "half"), ("fp32_grad_buffer", "yes"), ("nccl_buffsize_bytes", 0),
    ("cuda_context_GiB", -1),
])
def test_bad_execution_keys_are_spec_errors(key: str, value: object) -> None:
    with pytest.raises(SpecError) as err:
        small({key: value})
    assert key in str(err.value)


# Breakdown and run output -------------------------------------------------------------------------


def test_the_run_output_reports_the_first_stage_by_hand() -> None:
    """GPT-3 1.7B, TP2 PP2 1F1B over 16 GPUs (dp 4, ZeRO-1): the first stage peaks (the embedding
    and p = 2 micro-batches in flight). In GiB (2^30 B), by hand:
    parameters 12 layers x ((12h^2 + 7h)/2 + 6h) (Megatron's split over t = 2, see
    test_memory.py) + V h / 2 (vocabulary-parallel embedding) + s h (learned positions,
    replicated): 2 + 4 + 12/4 bytes each (bf16 weights, fp32 gradients, ZeRO paper K = 12 over
    N_d = 4); CUDA context 733,741,056 B; NCCL 688 MiB for each group of more than 2 ranks (dp 4,
    tp*pp 4) and 544 MiB for each 2-rank group (tp, pp, tied embedding); the embedding's bf16
    gradient 2 V h / t; no logits on the first stage; the allocator's 15% reserve on the dynamic
    part (activations and the embedding gradient)."""
    d = simulate(small(tp=2, pp=2), engine="analytical").to_dict()
    mem = d["memory_gib"]
    parts = mem["overhead_parts"]
    assert set(parts) == {"cuda_context", "nccl", "logits", "embedding_grad", "allocator"}
    assert mem["stage"] == 0
    h, vocab, seq, gib = 2304, 51200, 2048, 2**30
    params = 12 * ((12 * h**2 + 7 * h) / 2 + 6 * h) + vocab * h / 2 + seq * h
    assert mem["weights"] == pytest.approx(2 * params / gib, rel=1e-4)
    assert mem["grads"] == pytest.approx(4 * params / gib, rel=1e-4)
    assert mem["optimizer"] == pytest.approx(12 / 4 * params / gib, rel=1e-4)
    assert parts["cuda_context"] == 733_741_056 / gib
    assert parts["nccl"] == (2 * 688 + 3 * 544) / 1024
    assert parts["embedding_grad"] == pytest.approx(2 * vocab * h / 2 / gib)
    assert parts["logits"] == 0.0
    dynamic = mem["activations"] + parts["embedding_grad"]
    assert parts["allocator"] == pytest.approx(dynamic * 0.15 / 0.85)
    by_hand = (9 * params + 733_741_056) / gib + parts["nccl"] + dynamic / 0.85
    assert d["peak_memory_gib"] == pytest.approx(by_hand, rel=1e-4)


# Properties ---------------------------------------------------------------------------------------

PROPS = settings(max_examples=30, deadline=None)
counts = st.integers(0, 8)


@PROPS
@given(a=st.tuples(counts, counts, counts), extra=st.tuples(counts, counts, counts),
       buffsize=st.integers(1, 64 * MiB))
def test_more_communicators_never_reduce_nccl_memory(a: tuple[int, int, int],
                                                     extra: tuple[int, int, int],
                                                     buffsize: int) -> None:
    few = Communicators(*a)
    more = Communicators(*(x + y for x, y in zip(a, extra, strict=True)))
    assert nccl_bytes(more, buffsize) >= nccl_bytes(few, buffsize) >= 0
    assert nccl_bytes(few, buffsize + MiB) >= nccl_bytes(few, buffsize)


@PROPS
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]),
       micro=st.sampled_from([1, 2]), recompute=st.sampled_from(["none", "selective", "full"]),
       sp=st.booleans())
def test_memory_is_monotone_in_micro_batch_under_1f1b(tp: int, pp: int, micro: int,
                                                      recompute: str, sp: bool) -> None:
    """Fixed global batch: doubling b halves the micro-batches, so 1F1B holds min(p - i, m)
    micro-batches of twice the size: never less memory."""
    def peak(b: int) -> float:
        try:
            s = small(tp=tp, pp=pp, micro_batch=b, recompute=recompute,
                      sequence_parallel=sp and tp > 1, schedule="1f1b")
        except SpecError:
            assume(False)
            raise
        return estimate_memory(s).peak_bytes

    assert peak(2 * micro) >= peak(micro)


@PROPS
@given(context=st.floats(0, 4), fragmentation=st.floats(0, 0.9), buffsize=st.integers(1, 64),
       bump=st.sampled_from(["cuda_context_GiB", "allocator_fragmentation",
                             "nccl_buffsize_bytes"]))
def test_every_overhead_key_only_adds_memory(context: float, fragmentation: float,
                                             buffsize: int, bump: str) -> None:
    ex: dict[str, Any] = {"cuda_context_GiB": context, "allocator_fragmentation": fragmentation,
                          "nccl_buffsize_bytes": buffsize * MiB}
    more = dict(ex)
    more[bump] = {"cuda_context_GiB": context + 0.5,
                  "allocator_fragmentation": min(0.9, fragmentation + 0.05),
                  "nccl_buffsize_bytes": (buffsize + 4) * MiB}[bump]
    a, b = estimate_memory(small(ex, tp=2, pp=2)), estimate_memory(small(more, tp=2, pp=2))
    for x, y in zip(a.stages, b.stages, strict=True):
        assert y.total_bytes >= x.total_bytes
        if bump == "cuda_context_GiB":  # every GPU holds one more half GiB of context
            assert y.overhead_bytes - x.overhead_bytes == pytest.approx(0.5 * 2**30)
        if bump == "allocator_fragmentation" and fragmentation > 1e-6:
            # reserved = allocated / (1 - f): the reserve scales by f'/(1 - f') over f/(1 - f)
            f, g = fragmentation, more["allocator_fragmentation"]
            assert y.overheads.allocator == pytest.approx(
                x.overheads.allocator * (g / (1 - g)) / (f / (1 - f)), rel=1e-9)
        rest = (y.weights_bytes, y.grads_bytes, y.optimizer_bytes, y.activations_bytes)
        assert rest == (x.weights_bytes, x.grads_bytes, x.optimizer_bytes, x.activations_bytes)
