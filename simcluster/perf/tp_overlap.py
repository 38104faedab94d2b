"""Tensor-parallel communication overlapped with the GEMMs next to it (Transformer Engine
userbuffers, Megatron-Core ``--tp-comm-overlap``).

With sequence parallelism each transformer block gathers its input before the column-parallel
GEMM (QKV, MLP up/gate) and reduce-scatters the output of the row-parallel GEMM (projection, MLP
down) in forward; in backward it gathers the output gradient before the row-parallel GEMM's dgrad
and reduce-scatters the input gradient of the column-parallel GEMM (Korthikanti et al., arXiv
2205.05198, s4.2.2). Transformer Engine overlaps each with its GEMM (NeMo / Megatron-Bridge
userbuffers configurations, e.g. ``qkv_fprop``/``fc1_fprop``/``proj_dgrad``/``fc2_dgrad``:
``ring_exchange``; ``proj_fprop``/``fc2_fprop``: ``pipeline`` with ``num_splits: 4``;
``qkv_wgrad``/``fc1_wgrad``: ``bulk``):

- ``pipelined`` (split) overlap: the collective and its GEMM are cut into ``n`` chunks run as a
  two-stage pipeline, so of ``c`` seconds of communication next to ``g`` of GEMM,
  ``max(0, c - g) + min(c, g) / n`` stay exposed (one chunk fills the pipeline). Ring-exchange
  all-gathers use ``n = tp`` chunks, pipelined reduce-scatters ``n = 4``.
- ``bulk`` overlap: a collective runs beside an independent GEMM (the input-gradient
  reduce-scatter beside the weight-gradient GEMM): ``max(0, c - g)`` exposed.

``tp_comm_overlap: bulk`` overlaps only the bulk pairs (the backward reduce-scatter);
``pipelined`` overlaps every pair. Without sequence parallelism (all-reduces) Transformer Engine
does not overlap, and neither does this model.

The communication kernels take SMs from the GEMMs (``sms``: the accelerator's count), as
Megatron-Bridge's H100 bf16 GPT-3 175B configuration (``userbuffers_bf16_h100_h12288_tp4_mbs1_
seqlen2048``, ``megatron/bridge/training/comm_overlap.py``) sets them: the projection's pipelined
reduce-scatter holds 24 SMs with ``set_sm_margin`` (its GEMM is launched on the other ``S - 24``
for its whole run: ``x 24 / (S - 24)``), the MLP's ring-exchange reduce-scatter 1 with the margin,
and the bulk reduce-scatters beside the weight-gradient GEMMs (``qkv_wgrad``, ``fc1_wgrad``) 4
without it (``4 / S`` of the time they overlap). The ring-exchange all-gathers copy with the copy
engines (Transformer Engine's ``initialize_ub``: ``add_ub(..., use_ce=True)`` by default) and take
none. The SM cost is booked with the exposed TP time it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.perf.kernels.comm_sms import contention_s
from simcluster.perf.kernels.operator import LayerTimes, OperatorTime
from simcluster.spec.execution import TP_OVERLAP_MODES

__all__ = ["BULK_SMS", "PIPELINE_SPLITS", "ROW_MARGIN_SMS", "TP_OVERLAP_MODES", "BlockGemms",
           "blocks", "exposed_bulk", "exposed_pipelined", "margin_s", "overlapped_layer_s"]
#: Chunks of a pipelined reduce-scatter (``num_splits: 4`` in the userbuffers configurations).
PIPELINE_SPLITS = 4
#: Megatron-Bridge ``userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048``: SMs the row-parallel
#: GEMMs give up to the forward reduce-scatter (``set_sm_margin``), attention then MLP
#: (``proj_fprop`` pipeline ``num_sm=24``, ``fc2_fprop`` ring exchange ``num_sm=1``).
ROW_MARGIN_SMS = (24, 1)
#: SMs of a bulk reduce-scatter beside a weight-gradient GEMM (``qkv_wgrad``, ``fc1_wgrad``: 4).
BULK_SMS = 4


def exposed_pipelined(comm_s: float, gemm_s: float, chunks: int) -> float:
    """Communication left exposed by a ``chunks``-way pipeline of a collective with its GEMM."""
    return max(0.0, comm_s - gemm_s) + min(comm_s, gemm_s) / chunks


def exposed_bulk(comm_s: float, gemm_s: float) -> float:
    """Communication left exposed beside an independent GEMM."""
    return max(0.0, comm_s - gemm_s)


@dataclass(frozen=True, slots=True)
class BlockGemms:
    """One sub-block's GEMM times: the column-parallel GEMM(s) before, the row-parallel after."""

    column_fwd: float
    column_wgrad: float
    row_fwd: float
    row_dgrad: float


#: The GEMMs before the attention core (column-parallel, or MLA's duplicated down-projections).
ATTENTION_COLUMN = ("qkv", "q_down", "q_up", "kv_down", "kv_up")
#: The MLP's column- and row-parallel GEMMs: routed experts (or a dense MLP), shared experts,
#: dense blocks averaged into a MoE model (:mod:`.moe_layer`).
MLP_COLUMN = ("mlp_up", "mlp_gate", "shared_up", "shared_gate", "dense_up", "dense_gate")
MLP_ROW = ("mlp_down", "shared_down", "dense_down")


def _dgrad(op: OperatorTime) -> float:
    return op.backward_s - op.wgrad_s


def blocks(layer: LayerTimes) -> tuple[BlockGemms, BlockGemms]:
    """The attention and MLP sub-blocks' GEMMs of ``layer`` (QKV, or multi-head latent attention's
    projections | output projection; up and gate | down); MoE routed and shared experts and the
    averaged-in dense blocks count as the MLP's GEMMs."""
    ops = {o.name: o for o in layer.operators}
    qkv = [ops[n] for n in ATTENTION_COLUMN if n in ops]
    column = [ops[n] for n in MLP_COLUMN if n in ops]
    rows = [ops[n] for n in MLP_ROW if n in ops]
    attention = BlockGemms(sum(o.time_s for o in qkv), sum(o.wgrad_s for o in qkv),
                           ops["proj"].time_s, _dgrad(ops["proj"]))
    mlp = BlockGemms(sum(o.time_s for o in column), sum(o.wgrad_s for o in column),
                     sum(o.time_s for o in rows), sum(_dgrad(o) for o in rows))
    return attention, mlp


def overlapped_layer_s(mode: str, tp: int, gather_s: float, scatter_s: float,
                       layer: LayerTimes, sms: int = 0) -> tuple[float, float]:
    """Exposed (forward, backward) TP seconds of one layer with ``mode`` overlap (SP), with the
    SMs the overlap's kernels take from the GEMMs on an ``sms``-SM GPU (0: not counted).

    ``gather_s`` and ``scatter_s`` are one all-gather and one reduce-scatter of the block's
    activations; each sub-block runs one of each way.
    """
    forward = backward = 0.0
    for b, margin in zip(blocks(layer), ROW_MARGIN_SMS, strict=True):
        if mode == "pipelined":
            forward += (exposed_pipelined(gather_s, b.column_fwd, tp)
                        + exposed_pipelined(scatter_s, b.row_fwd, PIPELINE_SPLITS)
                        + margin_s(b.row_fwd, margin, sms))
            backward += exposed_pipelined(gather_s, b.row_dgrad, tp)
        else:
            forward += gather_s + scatter_s
            backward += gather_s
        bulk = exposed_bulk(scatter_s, b.column_wgrad)
        backward += bulk + (contention_s(BULK_SMS / sms, scatter_s - bulk) if sms > BULK_SMS
                            else 0.0)
    return forward, backward


def margin_s(gemm_s: float, margin: int, sms: int) -> float:
    """Extra seconds of a GEMM launched on ``sms - margin`` of ``sms`` SMs (0 when unknown)."""
    return gemm_s * margin / (sms - margin) if sms > margin else 0.0
