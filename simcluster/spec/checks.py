"""Consistency rules that span sections of a scenario (model x layout x hardware).

Each rule raises :class:`SpecError` with the key path of the value a user would change and what
was expected. The rules are the ones users hit in practice with Megatron-LM and DeepSpeed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcluster.errors import SpecError

if TYPE_CHECKING:
    from simcluster.spec.model import ModelSpec
    from simcluster.spec.scenario import Scenario


def check_scenario(s: Scenario) -> None:
    """Raise :class:`SpecError` for the first inconsistency in ``s``."""
    _check_tp(s)
    _check_pp(s)
    _check_cp_ep(s)
    _check_hardware(s)
    _check_perturbations(s)


def check_tp_divides_model(tp: int, m: ModelSpec, key: str = "parallelism.tp") -> None:
    """TP shards heads, key/value heads and the FFN: it must divide each of them."""
    if m.heads % tp:
        raise SpecError(key, f"{tp} does not divide heads={m.heads}")
    if m.kv_heads % tp:
        raise SpecError(key, f"{tp} does not divide kv_heads={m.kv_heads} "
                        "(each TP rank needs whole key/value heads)")
    if m.ffn_hidden % tp:
        raise SpecError(key, f"{tp} does not divide ffn_hidden={m.ffn_hidden}")


def _check_tp(s: Scenario) -> None:
    tp = s.parallelism.tp
    check_tp_divides_model(tp, s.model)
    if s.parallelism.sequence_parallel and tp == 1:
        raise SpecError("parallelism.sequence_parallel", "needs tp > 1 (it splits TP activations)")
    domain = _scale_up_domain(s)
    if tp > domain and not s.parallelism.tp_across_nodes:
        raise SpecError("parallelism.tp", f"{tp} exceeds the {domain} GPUs of one scale-up domain; "
                        "set parallelism.tp_across_nodes: true to allow it")


def _scale_up_domain(s: Scenario) -> int:
    topo = s.cluster.topology
    if topo.scale_up.kind == "nvl-domain":
        return topo.scale_up.domain_gpus
    return topo.gpus_per_node


def _check_pp(s: Scenario) -> None:
    par, layers = s.parallelism, s.model.layers
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


def _check_cp_ep(s: Scenario) -> None:
    par, m = s.parallelism, s.model
    if par.cp > 1 and m.seq_len % (2 * par.cp):
        raise SpecError("parallelism.cp", f"2*cp = {2 * par.cp} must divide seq_len={m.seq_len} "
                        "(load-balanced context parallelism splits the sequence in 2*cp chunks)")
    if par.ep > 1 and m.moe is None:
        raise SpecError("parallelism.ep", f"{par.ep} needs a mixture-of-experts model (model.moe)")
    if m.moe is not None and m.moe.experts % par.ep:
        raise SpecError("parallelism.ep", f"{par.ep} does not divide experts={m.moe.experts}")


def _check_hardware(s: Scenario) -> None:
    topo = s.cluster.topology
    if s.precision not in topo.accelerator.peak_flops_per_s:
        have = ", ".join(topo.accelerator.peak_flops_per_s)
        raise SpecError("precision", f"{s.precision} is not supported by {topo.accelerator.name} "
                        f"(has {have})")
    if s.cluster.nodes > 1 and topo.scale_out.nics_per_node == 0:
        raise SpecError("cluster.nodes", f"{s.cluster.nodes} nodes but topology {topo.name} has "
                        "no NICs (scale_out.nics_per_node: 0)")


def _check_perturbations(s: Scenario) -> None:
    nodes, gpus = s.cluster.nodes, s.cluster.topology.gpus_per_node
    for i, slow in enumerate(s.perturbations.gpu_slowdown):
        if slow.node >= nodes:
            raise SpecError(f"perturbations.gpu_slowdown[{i}].node",
                            f"{slow.node} is not a node of this cluster (0..{nodes - 1})")
        if slow.gpu is not None and slow.gpu >= gpus:
            raise SpecError(f"perturbations.gpu_slowdown[{i}].gpu",
                            f"{slow.gpu} is not a GPU of a node (0..{gpus - 1})")
    for i, link in enumerate(s.perturbations.link_bandwidth):
        if link.node is not None and link.node >= nodes:
            raise SpecError(f"perturbations.link_bandwidth[{i}].node",
                            f"{link.node} is not a node of this cluster (0..{nodes - 1})")
