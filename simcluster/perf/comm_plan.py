"""Communication of one training step, per category, from the layout and the collective model.

Message sizes follow Megatron-LM (Shoeybi et al. arXiv 1909.08053; Narayanan et al. SC'21;
Korthikanti et al. arXiv 2205.05198): per transformer layer and micro-batch, tensor parallelism
all-reduces the ``b*s/cp x h`` activations twice in forward and twice in backward (with sequence
parallelism: an all-gather and a reduce-scatter of the same array instead of each all-reduce);
full recompute repeats the forward ones. Pipeline stages exchange ``b*s/cp x h`` activations
(divided by ``tp``: Megatron's scatter/gather optimisation, or SP). Data parallelism reduces the
gradients once per step (an all-reduce, or with ZeRO >= 1 a reduce-scatter; the all-gather of
the updated 16-bit weights after the optimizer step is :mod:`simcluster.perf.param_gather`);
ZeRO-2 also reduce-scatters every earlier micro-batch (:func:`zero2_scatter_s`), and ZeRO-3 works
layer by layer (:mod:`simcluster.perf.zero3`).

Rank placement is Megatron's default order, TP fastest, then CP, DP, PP: a TP group has stride 1,
a CP group stride ``tp``, a DP group stride ``tp*cp``, PP neighbours stride ``tp*cp*dp``. The
experts have their own grid over the same ranks (Megatron-Core's expert rank generator, order
``tp-ep-dp-pp`` with the expert TP size ``etp``, ``megatron/core/parallel_state.py``): an
expert-TP group has stride 1, an EP group stride ``etp``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcluster.perf.collectives import CommGroup, collective_time, comm_group
from simcluster.perf.kernels.lowp import activation_dtype
from simcluster.perf.kernels.operator import DTYPE_BYTES, LayerTimes
from simcluster.perf.tp_overlap import overlapped_layer_s
from simcluster.spec.hardware import PRECISIONS
from simcluster.spec.scenario import Scenario

#: Bytes per element of the activations exchanged, per scenario precision (the activation dtype:
#: bf16 under fp8, mxfp8 and nvfp4, kernels/lowp.py).
ACT_BYTES = {p: DTYPE_BYTES[activation_dtype(p)] for p in PRECISIONS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Groups:
    """The communicators of one GPU (None where the degree is 1)."""

    tp: CommGroup | None
    cp: CommGroup | None
    dp: CommGroup | None
    ep: CommGroup | None
    pp: CommGroup | None
    etp: CommGroup | None = None  # the routed experts' TP group
    expert: CommGroup | None = None  # ETP x EP: the allgather dispatcher's group


def groups(s: Scenario) -> Groups:
    """The TP, CP, DP, EP and PP-neighbour groups under Megatron's rank order."""
    par, topo = s.parallelism, s.cluster.topology

    def make(size: int, stride: int) -> CommGroup | None:
        return comm_group(topo, size, stride) if size > 1 else None

    moe = s.model.moe is not None
    return Groups(tp=make(par.tp, 1), cp=make(par.cp, par.tp), dp=make(par.dp, par.tp * par.cp),
                  ep=make(par.ep, par.etp), pp=make(2, par.tp * par.cp * par.dp) if par.pp > 1
                  else None, etp=make(par.etp, 1) if moe else None,
                  expert=make(par.etp * par.ep, 1) if moe else None)


def activation_bytes(s: Scenario) -> float:
    """One micro-batch's hidden states on one GPU before TP splitting: ``b * s/cp * h`` elements."""
    par = s.parallelism
    return par.micro_batch * s.model.seq_len / par.cp * s.model.hidden * ACT_BYTES[s.precision]


def tp_layer_comm_s(s: Scenario, g: Groups, layer: LayerTimes | None = None
                    ) -> tuple[float, float]:
    """TP communication per layer per micro-batch: (forward, backward) seconds, exposed.

    Two all-reduces each way (after attention and after the MLP); with SP each becomes an
    all-gather plus a reduce-scatter of the same array. Megatron of SC'21 does not overlap them;
    with ``execution.tp_comm_overlap`` and SP they overlap the GEMMs next to them
    (:mod:`.tp_overlap`, which needs the ``layer``'s GEMM times). Full recompute repeats the
    forward pair inside the backward pass.
    """
    if g.tp is None:
        return 0.0, 0.0
    share = tp_pair_share(s)
    forward, backward = _tp_pairs_s(s, g.tp, layer)
    return share * forward, share * backward


def tp_pair_share(s: Scenario) -> float:
    """The share of a dense block's two TP pairs that a block of ``s`` runs: a MoE block keeps the
    attention's pair and its shared experts' (Megatron-Core's ``SharedExpertMLP`` gathers and
    scatters over the TP group), while its routed experts gather over the expert-TP group
    instead (:func:`ep_layer_comm_s`); a model's leading dense blocks are averaged in."""
    moe = s.model.moe
    if moe is None or moe.shared_experts:
        return 1.0
    return 1.0 - 0.5 * (1.0 - moe.dense_layers / s.model.layers)


def _tp_pairs_s(s: Scenario, tp: CommGroup, layer: LayerTimes | None) -> tuple[float, float]:
    size = activation_bytes(s)
    mode = s.execution.tp_comm_overlap
    if s.parallelism.sequence_parallel:
        gather = collective_time("all_gather", size, tp).time_s
        scatter = collective_time("reduce_scatter", size, tp).time_s
        if mode != "none" and layer is not None:
            forward, backward = overlapped_layer_s(mode, s.parallelism.tp, gather, scatter, layer,
                                                   s.cluster.topology.accelerator.sms)
            recompute = forward if s.parallelism.recompute == "full" else 0.0
            return forward, backward + recompute
        one = gather + scatter
    else:
        one = collective_time("all_reduce", size, tp).time_s
    recompute = 2 * one if s.parallelism.recompute == "full" else 0.0
    return 2 * one, 2 * one + recompute


def cp_layer_comm_s(s: Scenario, g: Groups, attention_fwd_s: float) -> tuple[float, float]:
    """Context-parallel attention's K/V exchange per layer per micro-batch: (forward, backward),
    exposed.

    ``p2p`` (ring attention, Liu et al. arXiv 2310.01889; Megatron-Core's default): each of the
    ``cp-1`` ring steps passes a K and V chunk (``b*s/cp*kv_heads*head_dim/tp`` elements each) to
    the next rank, overlapped with attention on the current chunk; backward also passes their
    gradients (twice the bytes). Only what the attention compute cannot hide is exposed.
    ``all_gather`` (Llama 3, Dubey et al. 2024 section 3.3.2): K and V of the whole sequence are
    all-gathered before the attention and their gradients reduce-scattered after it, exposed.
    """
    if g.cp is None:
        return 0.0, 0.0
    par, m = s.parallelism, s.model
    kv = 2 * par.micro_batch * m.seq_len / par.cp * m.kv_heads * m.head_dim / par.tp
    nbytes = kv * ACT_BYTES[s.precision]
    if s.execution.cp_comm_type == "all_gather":
        whole = nbytes * par.cp  # the gathered array, nccl-tests' size
        return (collective_time("all_gather", whole, g.cp).time_s,
                collective_time("reduce_scatter", whole, g.cp).time_s)
    step = collective_time("send_recv", nbytes, g.cp).time_s
    forward = max(0.0, (par.cp - 1) * step - attention_fwd_s)
    backward = max(0.0, 2 * (par.cp - 1) * step - 2 * attention_fwd_s)
    return forward, backward


def ep_layer_comm_s(s: Scenario, g: Groups) -> tuple[float, float]:
    """MoE token dispatch and combine per layer per micro-batch: (forward, backward), exposed.

    Each rank routes its ``1/tp`` of the micro-batch's tokens (sequence parallelism).
    ``alltoall`` (GShard, Lepikhin et al. arXiv 2006.16668; Megatron-Core's alltoall dispatcher):
    two all-to-alls of ``top_k`` copies of each local token's hidden state in forward and two in
    backward, over the expert-parallel group; with expert TP ``etp > 1`` the received rows are
    then all-gathered over the expert-TP group and the experts' outputs reduce-scattered back
    (``token_dispatcher.py``, ``dispatch_postprocess`` and ``combine_preprocess``). The
    all-to-all's size is each rank's send buffer, nccl-tests' convention
    (:func:`~simcluster.perf.collectives_formulas.pairwise_all_to_all_time_s`): the ``top_k``
    copies of the rank's own tokens, ``1/ep`` of which stay on the rank. ``flex`` (DeepEP,
    HybridEP) sends a token once to each rank holding any of its experts (:func:`flex_copies`;
    DeepEP's dispatch layout is a token-by-rank map, ``is_token_in_rank``), over the ETP x EP
    group (Megatron-Core hands DeepEP ``tp*top_k`` of ``tp*experts``: every expert-TP rank gets
    the token). ``allgather``: the ETP x EP group's tokens all-gathered before the experts and
    their outputs reduce-scattered after (Megatron-Core's allgather dispatcher, over its
    ``tp_ep_group``), the reverse in backward. The busiest rank receives ``moe.imbalance`` times
    the mean; a model's leading dense blocks have no dispatch (averaged over the layers, as
    :mod:`.moe_layer`).
    """
    moe = s.model.moe
    if g.expert is None or moe is None:
        return 0.0, 0.0
    par, dispatcher = s.parallelism, s.execution.moe_dispatcher
    tokens = activation_bytes(s) / par.tp  # this rank's tokens' hidden states
    if dispatcher == "allgather":
        whole = tokens * par.etp * par.ep * moe.imbalance  # the gathered array, nccl-tests' size
        one = (collective_time("all_gather", whole, g.expert).time_s
               + collective_time("reduce_scatter", whole, g.expert).time_s)
    elif dispatcher == "flex":
        copies = flex_copies(moe.top_k, par.ep, moe.experts) * par.etp
        one = 2 * collective_time("all_to_all", tokens * copies * moe.imbalance, g.expert).time_s
    else:
        received = tokens * moe.top_k * moe.imbalance
        one = 2 * collective_time("all_to_all", received, g.ep).time_s if g.ep else 0.0
        if g.etp is not None:
            whole = received * par.etp
            one += (collective_time("all_gather", whole, g.etp).time_s
                    + collective_time("reduce_scatter", whole, g.etp).time_s)
    share = 1.0 - moe.dense_layers / s.model.layers
    return share * one, share * one


def flex_copies(top_k: int, ep: int, experts: int) -> float:
    """Ranks a token is sent to when each rank receives it once: of ``ep`` ranks holding
    ``experts/ep`` experts each, the expected number holding at least one of the token's
    ``top_k`` distinct experts, drawn uniformly (balanced routing):
    ``ep (1 - C(E - E/ep, k) / C(E, k))``, between ``top_k/(E/ep)`` and ``min(top_k, ep)``."""
    miss = math.comb(experts - experts // ep, top_k) / math.comb(experts, top_k)
    return ep * (1.0 - miss)


def pp_message_s(s: Scenario, g: Groups) -> float:
    """One pipeline send of a micro-batch's activations (or their gradients) between stages.

    With scatter/gather (SC'21 section 4.1) or sequence parallelism each TP rank sends ``1/tp`` of
    the tensor; without SP the receiver then all-gathers it over the TP group. Without
    scatter/gather every TP rank sends the whole tensor over its own NIC.
    """
    if g.pp is None:
        return 0.0
    size = activation_bytes(s)
    par = s.parallelism
    if par.sequence_parallel:
        return collective_time("send_recv", size / par.tp, g.pp).time_s
    if not s.execution.scatter_gather or g.tp is None:
        return collective_time("send_recv", size, g.pp).time_s
    return (collective_time("send_recv", size / par.tp, g.pp).time_s
            + collective_time("all_gather", size, g.tp).time_s)


def dp_reduce_s(s: Scenario, g: Groups, params_on_gpu: float, grad_bytes: float) -> float:
    """The step's data-parallel gradient reduction, seconds.

    ZeRO 0: all-reduce of the gradients. ZeRO >= 1 (Megatron distributed optimizer): reduce-scatter
    of the gradients into each rank's shard (Rajbhandari et al. SC'20 section 7); the all-gather of
    the updated weights that follows the optimizer step is :mod:`simcluster.perf.param_gather`.
    """
    if g.dp is None:
        return 0.0
    grads = params_on_gpu * grad_bytes
    if s.parallelism.zero_stage == 0:
        return collective_time("all_reduce", grads, g.dp).time_s
    return collective_time("reduce_scatter", grads, g.dp).time_s


def zero2_scatter_s(s: Scenario, g: Groups, params_on_gpu: float, grad_bytes: float) -> float:
    """ZeRO-2's reduce-scatter of one intermediate micro-batch's gradients (0 unless ZeRO-2).

    ZeRO-2 keeps only this rank's gradient shard, so with gradient accumulation every micro-batch
    but the last reduce-scatters its gradients into the shard (the last one's reduction is
    :func:`dp_reduce_s`): ``m - 1`` extra reduce-scatters per step (Rajbhandari et al. SC'20
    section 5.2; the reason Megatron-LM pairs gradient accumulation with ZeRO-1).
    """
    if g.dp is None or s.parallelism.zero_stage != 2:
        return 0.0
    return collective_time("reduce_scatter", params_on_gpu * grad_bytes, g.dp).time_s


#: Megatron-LM's minimum gradient bucket, parameters (``bucket_size = max(40000000, 1000000 * dp)``).
BUCKET_PARAMS = 40_000_000
#: Most gradient buckets of one chunk: above it buckets grow (2**16 x 40M = 2.6e12 parameters in one
#: chunk, far above any real model), so that the DES's bucket count stays bounded.
MAX_BUCKETS = 2**16


def dp_buckets(s: Scenario, g: Groups, params_on_gpu: float, grad_bytes: float,
               final: bool = True) -> tuple[float, int]:
    """(one bucket's collective, buckets) of the gradients of ``params_on_gpu`` parameters.

    Megatron-LM's ``DistributedDataParallel`` reduces the gradients in buckets of
    ``max(40M, 1M x dp)`` parameters, one collective each (``final``: the step's reduction,
    :func:`dp_reduce_s`; else ZeRO-2's reduce-scatter of an earlier micro-batch,
    :func:`zero2_scatter_s`), so every bucket pays the collective's latency: with a large DP
    group (a ring's ``2(n-1)`` steps) that is most of the reduction. Both engines price the
    reduction this way (the discrete-event engine runs one transfer per bucket).
    """
    par = s.parallelism
    if par.dp == 1 or params_on_gpu <= 0:
        return 0.0, 0
    count = min(math.ceil(params_on_gpu / max(BUCKET_PARAMS, 1_000_000 * par.dp)), MAX_BUCKETS)
    reduce = dp_reduce_s if final else zero2_scatter_s
    one = reduce(s, g, params_on_gpu / count, grad_bytes)
    return (one, count) if one > 0 else (0.0, 0)
