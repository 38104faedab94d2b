"""A block's FFN on one GPU: a dense MLP, or a mixture-of-experts layer as Megatron-Core runs it.

The MoE layer (Megatron-LM ``megatron/core/transformer/moe/``: ``router.py``, ``token_dispatcher.py``,
``moe_utils.py``, ``experts.py``; docs/moe.md) is, per micro-batch on one GPU of ``T`` local tokens
(the GPU's ``1/tp`` of the micro-batch's: Megatron-Core trains a MoE model with TP only under
sequence parallelism, and each TP rank routes its own share):

- the router: a ``T x h x E`` GEMM in the activation dtype (not a Transformer Engine module), then
  the score function, top-k and routing map over ``T x E`` fp32 scores (:data:`ROUTER_PASSES`
  passes; Transformer Engine's fused router, ``moe_router_fusion``, does them in one kernel but
  still reads and writes the scores);
- the dispatcher's permutations (``moe_permute_fusion``, Transformer Engine's ``moe_permute`` and
  ``moe_sort_chunks_by_index`` kernels): ``alltoall`` gathers the ``T k`` routed copies into expert
  order before the all-to-all and sorts the received rows by local expert after it (unsorts and
  unpermutes on the way back, the unpermute weighting each copy by its probability and summing
  the ``k`` copies into ``T`` rows); ``allgather`` gathers the EP group's tokens and permutes the
  local experts' rows out of them; ``flex`` (DeepEP, HybridEP) fuses the permutation into its
  dispatch and combine kernels, so only the weighted combine stays;
- the routed experts: grouped GEMMs over ``E/ep`` local experts of ``etp T k ep / E`` rows each
  (the expert-TP group's received rows, gathered) and ``1/etp`` of the FFN width, times
  ``moe.imbalance`` on the busiest rank (every EP rank waits for it in the combine);
- the shared experts (DeepSeekMoE): a dense MLP of ``shared_experts x shared_ffn_hidden`` on all
  ``T`` tokens, TP-split like a dense MLP (its overlap with the dispatch, Megatron's
  ``--moe-shared-expert-overlap``, is not modelled: it runs in series).

A model's leading dense blocks (``moe.dense_layers``) are averaged in: every block's operators are
the MoE block's, weighted ``1 - d/L``, plus the dense block's, weighted ``d/L`` (their FLOPs, times
and bytes), so ``L`` blocks cost what the ``d`` dense and ``L - d`` MoE blocks cost together.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from simcluster.errors import SpecError
from simcluster.perf.kernels import eager
from simcluster.perf.kernels.elementwise import memory_operator
from simcluster.perf.kernels.gemm import gemm_operator
from simcluster.perf.kernels.lowp import LinearFormat, activation_dtype
from simcluster.perf.kernels.operator import OperatorTime
from simcluster.perf.layer_ops import Shape, check_split, linear, scaled
from simcluster.perf.params import shared_ffn_hidden
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.model import ModelSpec, MoESpec

#: Passes over the ``T x E`` fp32 router scores: the score function (softmax or sigmoid), top-k
#: and the scatter into the routing map and probabilities (Megatron-LM ``moe_utils.py``
#: ``topk_routing_with_score_function``), each a read and a write of 4-byte scores.
ROUTER_PASSES: Final = 3
#: Bytes per score and pass: one fp32 read and one fp32 write.
ROUTER_BYTES_PER_SCORE: Final = 8


def ffn_operators(model: ModelSpec, acc: AcceleratorSpec, lin: LinearFormat, sh: Shape, tp: int,
                  ep: int, eager_ops: bool = False, dispatcher: str = "alltoall",
                  etp: int | None = None) -> list[OperatorTime]:
    """The FFN's operators: a dense MLP, or the MoE layer with its leading dense blocks averaged in
    (module docstring); ``etp``: the routed experts' TP size (default ``tp``)."""
    moe = model.moe
    if moe is None:
        return dense_mlp(model, acc, lin, sh, tp, model.ffn_hidden, "mlp", eager_ops,
                         input_fused=True)
    sparse = moe_operators(model, moe, acc, lin, sh, (tp, tp if etp is None else etp), ep,
                           eager_ops, dispatcher)
    if not moe.dense_layers:
        return sparse
    share = moe.dense_layers / model.layers
    dense = dense_mlp(model, acc, lin, sh, tp, moe.dense_ffn_hidden, "dense", eager_ops,
                      input_fused=True)
    return [scaled(o, 1.0 - share) for o in sparse] + [scaled(o, share) for o in dense]


def dense_mlp(model: ModelSpec, acc: AcceleratorSpec, lin: LinearFormat, sh: Shape, tp: int,
              width: int, prefix: str, eager_ops: bool, *, rows: float | None = None,
              experts: float = 1.0, input_fused: bool = False) -> list[OperatorTime]:
    """An MLP of inner size ``width`` (split over ``tp``): up (and gate for swiglu), the
    activation, down; ``experts`` of them (a grouped GEMM) of ``rows`` tokens each (default all
    of the shape's). Operators are named ``{prefix}_up``, ``{prefix}_gate``, ``{prefix}_down``
    (``mlp_*`` and ``activation`` for a dense block's or the routed experts' MLP)."""
    check_split("ffn_hidden", width, tp)
    h, f = model.hidden, width / tp
    rows = sh.tokens if rows is None else rows
    names = ("gate", "up") if model.ffn_act == "swiglu" else ("up",)
    result: list[OperatorTime] = []
    for name in names:  # a norm writes the input's copies; tokens permuted to experts do not
        result += _grouped(linear(acc, lin, f"{prefix}_{name}", (rows, f, h), experts,
                                  input_fused=input_fused, grad_fused=True), experts)
    inner = experts * rows * f
    act_name = "activation" if prefix == "mlp" else f"{prefix}_activation"
    if eager_ops and model.ffn_act == "swiglu":
        op = eager.swiglu(acc, inner)
        result.append(op if act_name == "activation" else _renamed(op, act_name))
    else:
        act_bytes = (3 if model.ffn_act == "swiglu" else 2) * inner * sh.size  # swiglu: 2 inputs
        result.append(memory_operator(acc, act_name, act_bytes))
    return result + _grouped(linear(acc, lin, f"{prefix}_down", (rows, h, f), experts), experts)


def _grouped(ops: list[OperatorTime], experts: float) -> list[OperatorTime]:
    """A grouped GEMM's operators with one host-issued GEMM per local expert (Transformer
    Engine's ``GroupedLinear``: ``general_grouped_gemm`` calls cuBLAS once per expert,
    transformer_engine/pytorch/cpp_extensions/gemm.py @v2.8); its casts stay one call each."""
    if experts <= 1:
        return ops
    return [dataclasses.replace(o, launches=experts) if o.kind == "gemm" else o for o in ops]


def moe_operators(model: ModelSpec, moe: MoESpec, acc: AcceleratorSpec, lin: LinearFormat,
                  sh: Shape, tps: tuple[int, int], ep: int, eager_ops: bool, dispatcher: str
                  ) -> list[OperatorTime]:
    """Router, dispatch permutations, routed experts and shared experts of one MoE block of
    ``model`` (``moe``: its ``model.moe``); ``tps``: the TP and the expert-TP sizes."""
    if moe.experts % ep:
        raise SpecError("ep", f"{ep} does not divide experts={moe.experts}")
    tp, etp = tps
    local = moe.experts / ep
    own = sh.tokens / tp  # the tokens this GPU routes (its sequence-parallel share)
    routed = own * moe.top_k  # copies this GPU's tokens make
    received = etp * routed * moe.imbalance  # rows the busiest rank's experts run
    result = [gemm_operator(acc, activation_dtype(lin.dtype), "router",
                            (own, moe.experts, model.hidden)),
              memory_operator(acc, "router_topk",
                              ROUTER_PASSES * ROUTER_BYTES_PER_SCORE * own * moe.experts)]
    result += permutations(model, acc, dataclasses.replace(sh, tokens=own), routed, received, ep,
                           local, dispatcher)
    result += dense_mlp(model, acc, lin, sh, etp, model.ffn_hidden, "mlp", eager_ops,
                        rows=received / local, experts=local)
    shared = shared_ffn_hidden(model)
    if shared:
        result += dense_mlp(model, acc, lin, sh, tp, shared, "shared", eager_ops,
                            input_fused=True)
    return result


def permutations(model: ModelSpec, acc: AcceleratorSpec, sh: Shape, routed: float,
                 received: float, ep: int, local: float, dispatcher: str) -> list[OperatorTime]:
    """The dispatcher's memory-bound permutations of one MoE block (forward bytes; the backward
    moves the same rows the other way: a gather's gradient is a scatter of the same bytes).

    ``routed``: the ``T k`` copies of this GPU's tokens; ``received``: the rows its experts run.
    Every copy is a read and a write of ``h`` activations; the unpermute reads the ``k`` copies and
    writes ``T`` rows.
    """
    row = model.hidden * sh.size
    combine = (routed + sh.tokens) * row  # weighted sum of the k copies back into T rows
    if dispatcher == "flex":
        copies = 0.0  # fused into DeepEP's / HybridEP's dispatch and combine kernels
    elif dispatcher == "allgather":
        copies = 2 * received * row  # the local experts' rows picked out of the gathered tokens
    else:
        sort = 2 * 2 * received * row if ep > 1 and local > 1 else 0.0  # sort and unsort
        copies = 2 * routed * row + sort
    result = [memory_operator(acc, "unpermute", combine, backward_factor=1.0)]
    if copies:
        result.insert(0, memory_operator(acc, "permute", copies, backward_factor=1.0))
    return result


def _renamed(op: OperatorTime, name: str) -> OperatorTime:
    return dataclasses.replace(op, name=name)
