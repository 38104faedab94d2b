"""Consistency rules that span sections of a scenario (model x layout x hardware).

Each rule raises :class:`SpecError` with the key path of the value a user would change and what
was expected. The rules are the ones users hit in practice with Megatron-LM and DeepSpeed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from simcluster.errors import SpecError
from simcluster.spec.hardware import BLOCK_SCALED_ARCHS, LOW_PRECISION

if TYPE_CHECKING:
    from simcluster.spec.hardware import AcceleratorSpec, TopologySpec
    from simcluster.spec.model import ModelSpec
    from simcluster.spec.scenario import ParallelismSpec, Scenario


def check_scenario(s: Scenario) -> None:
    """Raise :class:`SpecError` for the first inconsistency in ``s``."""
    check_parallelism(s.parallelism, s.model, s.cluster.topology)
    _check_hardware(s)
    _check_perturbations(s)


def check_parallelism(par: ParallelismSpec, m: ModelSpec, topo: TopologySpec) -> None:
    """The layout rules that involve the model and the hardware (keys under ``parallelism``).

    Shared by the loader (through :func:`check_scenario`) and :func:`simcluster.spec.check_layout`.
    """
    _check_tp(par, m)
    _check_pp(par, m.layers)
    _check_cp_ep(par, m)
    _check_offload(par)
    gpus = par.tp * par.pp * par.cp * par.dp
    _check_placement(par, min(scale_up_domain(topo), gpus))  # a job inside one domain: its GPUs


def check_tp_divides_model(tp: int, m: ModelSpec, key: str = "parallelism.tp") -> None:
    """TP shards heads, key/value heads and the FFN: it must divide each of them."""
    if m.heads % tp:
        raise SpecError(key, f"{tp} does not divide heads={m.heads}")
    if m.kv_heads % tp:
        raise SpecError(key, f"{tp} does not divide kv_heads={m.kv_heads} "
                        "(each TP rank needs whole key/value heads)")
    if m.ffn_hidden % tp:
        raise SpecError(key, f"{tp} does not divide ffn_hidden={m.ffn_hidden}")


def _check_tp(par: ParallelismSpec, m: ModelSpec) -> None:
    check_tp_divides_model(par.tp, m)
    if par.sequence_parallel and par.tp == 1:
        raise SpecError("parallelism.sequence_parallel", "needs tp > 1 (it splits TP activations)")


def _check_offload(par: ParallelismSpec) -> None:
    """DeepSpeed's rules (``deepspeed/runtime/zero/config.py``): ``offload_optimizer`` is "valid
    for ZeRO stage 1, 2, 3", ``offload_param`` "valid only with stage 3"."""
    if par.offload == "optimizer" and par.zero_stage < 1:
        raise SpecError("parallelism.offload", "optimizer needs zero_stage >= 1 (the CPU updates "
                        f"each GPU's ZeRO shard), got zero_stage {par.zero_stage}")
    if par.offload == "optimizer+params" and par.zero_stage != 3:
        raise SpecError("parallelism.offload", "optimizer+params needs zero_stage 3 (the "
                        f"parameters are offloaded as ZeRO-3 shards), got zero_stage "
                        f"{par.zero_stage}")


def scale_up_domain(topo: TopologySpec) -> int:
    """GPUs of one scale-up fabric: the NVLink domain for ``nvl-domain``, else the node."""
    if topo.scale_up.kind == "nvl-domain":
        return topo.scale_up.domain_gpus
    return topo.gpus_per_node


def _check_placement(par: ParallelismSpec, domain: int) -> None:
    """No TP, TP*CP or expert (ETP*EP) block of consecutive ranks straddles a scale-up domain.

    Megatron's rank order puts TP fastest, then CP, then DP: the ranks of a TP group are
    consecutive, those of a CP group stride ``tp``; the experts have their own grid
    (:func:`_check_expert_placement`), where an EP group strides the expert TP size. A
    block must fit a domain evenly (its size divides the domain) or consist of whole domains (a
    multiple of it); the collective model prices exactly those two shapes. TP beyond one domain
    also needs ``tp_across_nodes``. A job smaller than one domain (64 GPUs of a 72-GPU NVL72 rack)
    passes ``domain`` = its GPU count: no block of it can leave the domain.
    """
    tp, block = par.tp, par.tp * par.cp
    if domain % tp and not par.tp_across_nodes:
        raise SpecError("parallelism.tp", f"{tp} does not divide the {domain} GPUs of one scale-up "
                        "domain: TP groups would span domains; use a divisor of "
                        f"{domain}, or set parallelism.tp_across_nodes: true with a multiple of it")
    if domain % tp and tp % domain:
        raise SpecError("parallelism.tp", f"{tp} with tp_across_nodes must be a multiple of the "
                        f"{domain} GPUs of one scale-up domain (TP groups of whole domains)")
    if domain % block and block % domain:
        raise SpecError("parallelism.cp", f"tp*cp = {tp}*{par.cp} = {block} neither divides nor is "
                        f"a multiple of the {domain} GPUs of one scale-up domain: CP groups would "
                        "straddle domains")
    _check_expert_placement(par, domain)


def _check_expert_placement(par: ParallelismSpec, domain: int) -> None:
    """The expert grid (Megatron-Core's expert rank generator, order ``tp-ep-dp-pp`` with the
    expert TP size, ``megatron/core/parallel_state.py``): an expert-TP group is ``etp``
    consecutive ranks, an EP group strides ``etp``, so one EP group with its expert-TP groups is a
    block of ``etp*ep`` consecutive ranks."""
    etp, ep_block = par.etp, par.etp * par.ep
    if etp != par.tp and domain % etp:
        raise SpecError("parallelism.expert_tp", f"{etp} does not divide the {domain} GPUs of one "
                        "scale-up domain: expert-TP groups would span domains")
    if par.ep > 1 and domain % ep_block and ep_block % domain:
        raise SpecError("parallelism.ep", f"expert_tp*ep = {etp}*{par.ep} = {ep_block} neither "
                        f"divides nor is a multiple of the {domain} GPUs of one scale-up domain: "
                        "EP groups would straddle domains")


def _check_pp(par: ParallelismSpec, layers: int) -> None:
    chunks = par.pp * par.virtual_stages
    if par.stage_layers is not None:
        if len(par.stage_layers) != chunks:
            raise SpecError("parallelism.stage_layers", f"has {len(par.stage_layers)} entries, "
                            f"expected pp*virtual_stages = {chunks}")
        if sum(par.stage_layers) != layers:
            raise SpecError("parallelism.stage_layers",
                            f"sums to {sum(par.stage_layers)}, expected layers={layers}")
    elif layers % chunks:
        what = "pp*virtual_stages" if par.virtual_stages > 1 else "pp"
        raise SpecError("parallelism.pp", f"{what} = {chunks} does not divide layers={layers}; "
                        "state uneven stages with parallelism.stage_layers")
    if par.pp > 1 and par.zero_stage >= 2:
        raise SpecError("parallelism.zero_stage", f"{par.zero_stage} with pp={par.pp}: ZeRO-2/3 "
                        "shard gradients that pipeline micro-batches accumulate; use 0 or 1")
    if par.pp > 1 and par.micro_batches < 1:
        raise SpecError("parallelism.global_batch", "gives no micro-batch per pipeline")


def _check_cp_ep(par: ParallelismSpec, m: ModelSpec) -> None:
    if par.cp > 1 and m.seq_len % (2 * par.cp):
        raise SpecError("parallelism.cp", f"2*cp = {2 * par.cp} must divide seq_len={m.seq_len} "
                        "(load-balanced context parallelism splits the sequence in 2*cp chunks)")
    if par.ep > 1 and m.moe is None:
        raise SpecError("parallelism.ep", f"{par.ep} needs a mixture-of-experts model (model.moe)")
    if m.moe is not None and m.moe.experts % par.ep:
        raise SpecError("parallelism.ep", f"{par.ep} does not divide experts={m.moe.experts}")
    _check_expert_tp(par, m)


def _check_expert_tp(par: ParallelismSpec, m: ModelSpec) -> None:
    """Expert TP needs experts whose FFN it divides; Megatron-Core's ``MoELayer`` refuses to train
    a MoE model with TP > 1 without sequence parallelism (``moe_layer.py``), which the token
    dispatch relies on (each TP rank routes its ``1/tp`` of the tokens)."""
    if par.expert_tp is not None and m.moe is None:
        raise SpecError("parallelism.expert_tp", f"{par.expert_tp} needs a mixture-of-experts "
                        "model (model.moe)")
    if m.moe is None:
        return
    if m.ffn_hidden % par.etp:
        raise SpecError("parallelism.expert_tp", f"{par.etp} does not divide the experts' "
                        f"ffn_hidden={m.ffn_hidden}")
    if par.tp > 1 and not par.sequence_parallel:
        raise SpecError("parallelism.sequence_parallel", f"a mixture-of-experts model with "
                        f"tp={par.tp} needs sequence_parallel: true (Megatron-Core's MoE layer "
                        "trains only with it; the dispatcher routes each TP rank's share of "
                        "the tokens)")


def _check_precision(acc: AcceleratorSpec, precision: str) -> None:
    """The accelerator runs ``precision``: its tensor-core peak is listed, and block-scaled
    formats need Blackwell (``execution.fp8_recipe`` applies to precision fp8 only and is
    ignored otherwise: a stack states it for every precision)."""
    if precision in ("mxfp8", "nvfp4") and acc.arch not in BLOCK_SCALED_ARCHS:
        hint = ": use fp8" if acc.arch == "hopper" else ""
        arch = acc.arch or "of no stated architecture"
        raise SpecError("precision", f"{precision} needs block-scaled tensor cores (Blackwell, "
                        f"sm100 and later); {acc.name} is {arch}{hint}")
    peak = LOW_PRECISION.get(precision, precision)
    if peak not in acc.peak_flops_per_s:
        have = ", ".join(acc.peak_flops_per_s)
        raise SpecError("precision", f"{precision} is not supported by {acc.name}: it runs at "
                        f"the {peak} tensor-core rate, and peak_TFLOPS has {have}")


def _check_hardware(s: Scenario) -> None:
    topo = s.cluster.topology
    _check_precision(topo.accelerator, s.precision)
    if s.cluster.nodes > 1 and topo.scale_out.nics_per_node == 0:
        raise SpecError("cluster.nodes", f"{s.cluster.nodes} nodes but topology {topo.name} has "
                        "no NICs (scale_out.nics_per_node: 0)")


def _check_perturbations(s: Scenario) -> None:
    p = s.perturbations
    check_perturbation_entries(s.cluster.nodes, s.cluster.topology.gpus_per_node,
                               p.gpu_slowdown, p.link_bandwidth)


class SlowGpu(Protocol):
    """A slow-GPU entry: the scenario's ``GpuSlowdownSpec`` or the DES's ``GpuSlowdown``."""

    @property
    def node(self) -> int: ...
    @property
    def gpu(self) -> int | None: ...
    @property
    def factor(self) -> float: ...


class SlowLink(Protocol):
    """A degraded-link entry: ``LinkBandwidthSpec`` or the DES's ``LinkDegradation``."""

    @property
    def layer(self) -> str: ...
    @property
    def node(self) -> int | None: ...
    @property
    def factor(self) -> float: ...


def check_perturbation_entries(nodes: int, gpus: int, gpu_slowdown: Sequence[SlowGpu],
                               link_bandwidth: Sequence[SlowLink]) -> None:
    """The one check of perturbation entries against a cluster of ``nodes`` x ``gpus`` GPUs: the
    loader's (a scenario's section) and the DES's (values passed to ``simulate_step``)."""
    from simcluster.spec.scenario import LINK_LAYERS  # scenario imports this module

    for i, slow in enumerate(gpu_slowdown):
        key = f"perturbations.gpu_slowdown[{i}]"
        if not 0 <= slow.node < nodes:
            raise SpecError(f"{key}.node",
                            f"{slow.node} is not a node of this cluster (0..{nodes - 1})")
        if slow.gpu is not None and not 0 <= slow.gpu < gpus:
            raise SpecError(f"{key}.gpu", f"{slow.gpu} is not a GPU of a node (0..{gpus - 1})")
        if not 0 < slow.factor <= 1:
            raise SpecError(f"{key}.factor", f"must be in (0, 1], got {slow.factor}")
    for i, link in enumerate(link_bandwidth):
        key = f"perturbations.link_bandwidth[{i}]"
        if link.layer not in LINK_LAYERS:
            raise SpecError(f"{key}.layer", f"{link.layer!r} is not one of {list(LINK_LAYERS)}")
        if link.node is not None and not 0 <= link.node < nodes:
            raise SpecError(f"{key}.node",
                            f"{link.node} is not a node of this cluster (0..{nodes - 1})")
        if not link.factor > 0:
            raise SpecError(f"{key}.factor", f"must be > 0, got {link.factor}")
