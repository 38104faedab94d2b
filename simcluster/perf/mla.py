"""Multi-head latent attention on one GPU, as Megatron-Core's ``MLASelfAttention`` runs it.

DeepSeek-V2 (arXiv 2405.04434 section 2.1) and DeepSeek-V3 compress the keys and values into a
shared ``kv_lora_rank`` latent per token and the queries into a ``q_lora_rank`` one. In training
the latents are projected back up and attention runs as multi-head attention with query/key heads
of ``head_dim`` (a non-rotary part plus ``rope_head_dim`` rotary dimensions, the rotary key shared
by the heads) and value heads of ``v_head_dim`` (Megatron-LM
``megatron/core/transformer/multi_latent_attention.py``):

- the down-projections ``h -> q_lora`` and ``h -> kv_lora + rope`` are duplicated on every TP rank
  (they are small), each followed by an RMSNorm of its latent;
- the up-projections ``q_lora -> heads*head_dim`` and ``kv_lora -> heads*(nope + v_head_dim)`` are
  column-parallel (``heads/tp`` per rank), the output projection ``heads*v_head_dim -> h``
  row-parallel;
- the rotary embedding of the query's and the shared key's rotary parts, then the copies that
  concatenate the non-rotary and rotary parts into whole query and key heads;
- the fused attention kernel on query/key heads of ``head_dim`` and value heads of
  ``v_head_dim``, priced at the query/key head size (:mod:`.kernels.attention` interpolates its
  tables between the tabled head dimensions).
"""

from __future__ import annotations

from simcluster.perf.kernels.attention import causal_cp_fraction, fused_attention_operator
from simcluster.perf.kernels.elementwise import memory_operator
from simcluster.perf.kernels.lowp import LinearFormat
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.perf.layer_ops import Shape, linear, norm
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import MLASpec, ModelSpec


def mla_projections(model: ModelSpec, a: MLASpec, acc: AcceleratorSpec, lin: LinearFormat,
                    sh: Shape, eager_ops: bool) -> list[OperatorTime]:
    """Down-projections, latent norms, up-projections, rotary embedding and concatenation of
    ``model``'s attention ``a`` (its ``model.mla``)."""
    h, hd = model.hidden, model.head_dim
    heads = sh.heads
    result: list[OperatorTime] = []
    if a.q_lora_rank:
        result += linear(acc, lin, "q_down", (sh.tokens, a.q_lora_rank, h), input_fused=False)
        result.append(norm(model, acc, "q_norm", sh.tokens * a.q_lora_rank, sh.size, eager_ops))
        result += linear(acc, lin, "q_up", (sh.tokens, heads * hd, a.q_lora_rank))
    else:
        result += linear(acc, lin, "q_up", (sh.tokens, heads * hd, h), input_fused=False)
    result += linear(acc, lin, "kv_down", (sh.tokens, a.kv_lora_rank + a.rope_head_dim, h),
                     input_fused=False)
    result.append(norm(model, acc, "kv_norm", sh.tokens * a.kv_lora_rank, sh.size, eager_ops))
    nope = hd - a.rope_head_dim
    result += linear(acc, lin, "kv_up", (sh.tokens, heads * (nope + a.v_head_dim),
                                         a.kv_lora_rank))
    rotated = sh.tokens * (heads + 1) * a.rope_head_dim  # the queries' and the shared key's
    result.append(memory_operator(acc, "rope", 2 * rotated * sh.size, backward_factor=1.0))
    whole = sh.tokens * heads * hd  # query and key heads written whole, from their two parts
    result.append(memory_operator(acc, "mla_concat", 2 * 2 * whole * sh.size, backward_factor=1.0))
    return result


def mla_core(model: ModelSpec, a: MLASpec, acc: AcceleratorSpec, dtype: str, sh: Shape,
             kernel: str, causal: bool, balanced: bool) -> OperatorTime:
    """The fused attention kernel: ``2 b heads q s (head_dim + v_head_dim)`` FLOPs for ``q`` local
    queries against ``s`` keys; Q, K, V read, O written."""
    q = sh.tokens / sh.batch
    flops = 2.0 * sh.batch * sh.heads * q * sh.seq * (model.head_dim + a.v_head_dim)
    nbytes = (sh.tokens * sh.heads * (model.head_dim + a.v_head_dim)  # Q read, O written
              + sh.batch * sh.seq * sh.heads * (model.head_dim + a.v_head_dim)) * sh.size  # K, V
    return fused_attention_operator(acc, dtype, kernel, flops, nbytes, model.head_dim, q, causal,
                                    causal_cp_fraction(sh.cp, balanced))


def mla_output(model: ModelSpec, a: MLASpec, acc: AcceleratorSpec, lin: LinearFormat,
               sh: Shape) -> list[OperatorTime]:
    """The row-parallel output projection ``heads*v_head_dim -> h``."""
    return linear(acc, lin, "proj", (sh.tokens, model.hidden, sh.heads * a.v_head_dim),
                  input_fused=False)
