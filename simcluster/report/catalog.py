"""Tables of the catalog presets for ``simcluster catalog``."""

from __future__ import annotations

from simcluster import catalog
from simcluster.horizon.config import DAY_S, failure_classes
from simcluster.perf.kernels import attention
from simcluster.perf.params import count_params
from simcluster.report.table import format_table
from simcluster.spec import schema
from simcluster.spec.hardware import AcceleratorSpec
from simcluster.spec.loader import load_topology
from simcluster.spec.model import ModelSpec
from simcluster.spec.scenario import ReliabilitySpec
from simcluster.units import GB, GiB


def accelerators_table() -> str:
    """One row per accelerator preset: memory, bandwidth, dense peaks, TDP."""
    rows = []
    for name in catalog.names("accelerators"):
        acc = schema.parse(AcceleratorSpec, catalog.entry("accelerators", name), name)
        peak = acc.peak_flops_per_s
        rows.append([name, acc.arch or "-", acc.memory_bytes / GiB, acc.memory_bandwidth_Bps / GB,
                     _tf(peak.get("bf16")), _tf(peak.get("fp16")), _tf(peak.get("fp8")),
                     _tf(peak.get("fp32")), acc.tdp_W])
    return format_table(["accelerator", "arch", "mem GiB", "HBM GB/s", "bf16 TF", "fp16 TF",
                         "fp8 TF", "fp32 TF", "TDP W"], rows)


def models_table() -> str:
    """One row per model preset: shape and parameter count."""
    rows = []
    for name in catalog.names("models"):
        m = schema.parse(ModelSpec, catalog.entry("models", name), name)
        params = count_params(m)
        rows.append([name, m.layers, m.hidden, m.heads, m.kv_heads, _attention(m), m.ffn_hidden,
                     m.ffn_act, m.vocab, m.seq_len, _moe(m), f"{params.total / 1e9:.2f}",
                     f"{params.active / 1e9:.2f}"])
    return format_table(["model", "layers", "hidden", "heads", "kv", "attn", "ffn", "act", "vocab",
                         "seq", "moe", "params B", "active B"], rows)


def _attention(m: ModelSpec) -> str:
    """``mla``, ``gqa`` (fewer key/value heads than query heads) or ``mha``, and ``w128`` for a
    sliding window of 128 tokens."""
    kind = "mla" if m.mla is not None else "gqa" if m.kv_heads < m.heads else "mha"
    return kind + (f" w{m.window}" if m.window else "")


def _moe(m: ModelSpec) -> str:
    """``256x top8 +1sh 3d``: routed experts, top_k, shared experts, leading dense blocks."""
    if m.moe is None:
        return "-"
    parts = [f"{m.moe.experts}x top{m.moe.top_k}"]
    parts += [f"+{m.moe.shared_experts}sh"] if m.moe.shared_experts else []
    parts += [f"{m.moe.dense_layers}d"] if m.moe.dense_layers else []
    return " ".join(parts)


def topologies_table() -> str:
    """One row per topology preset: accelerator, node, scale-up and scale-out."""
    rows = []
    for name in catalog.names("topologies"):
        t = load_topology(name)
        out = t.scale_out
        rows.append([name, t.accelerator.name, t.gpus_per_node,
                     f"{t.scale_up.kind} {t.scale_up.bandwidth_Bps / GB:g}",
                     f"{out.nics_per_node}x{out.nic_Bps * 8 / GB:g}", out.fabric,
                     out.oversubscription])
    return format_table(["topology", "accelerator", "gpus/node", "scale-up GB/s",
                         "NICs x Gb/s", "fabric", "oversub"], rows)


def stacks_table() -> str:
    """One row per software-stack preset: its execution flags and what it leaves unmodelled."""
    rows = []
    for name in catalog.names("stacks"):
        stack = catalog.entry("stacks", name)
        flags = stack.get("execution", {})
        on = [k for k, v in flags.items() if v is True]
        rows.append([name, flags.get("attention", "-"), " ".join(on) or "-",
                     len(stack.get("not_modelled", [])), stack.get("description", "")])
    return format_table(["stack", "attention", "flags on", "not modelled", "description"], rows,
                        wrap={2: 36, 4: 48})


def reliability_table() -> str:
    """One row per reliability preset: its rates, lemon nodes and the job MTTF they give at 1 and
    128 nodes (8 and 1,024 GPUs of 8-GPU nodes), from the classes the horizon engine draws
    (:func:`simcluster.horizon.config.failure_classes`: lemons, fabric classes left out alone)."""
    rows = []
    for name in catalog.names("reliability"):
        preset = catalog.entry("reliability", name)
        rel = schema.parse(ReliabilitySpec, preset.get("reliability", {}), name)
        rows.append([name, rel.failure_rate_per_node_day * 1e3, rel.lemon_fraction,
                     rel.lemon_multiplier, _mttf(rel, 1, DAY_S), _mttf(rel, 128, 3600.0),
                     preset.get("description", "")])
    return format_table(["preset", "per 1k node-days", "lemons", "lemon x", "MTTF 1 node d",
                         "MTTF 128 nodes h", "description"], rows, wrap={6: 44})


def _mttf(rel: ReliabilitySpec, nodes: int, unit_s: float) -> str:
    """Mean time between the job's failures on ``nodes`` nodes, in ``unit_s`` (``-``: none)."""
    rate = nodes * sum(c.rate_per_node_s for c in failure_classes(rel, nodes))
    return f"{1.0 / (rate * unit_s):.1f}" if rate > 0 else "-"


def attention_table() -> str:
    """One row per attention kernel and architecture with a table: forward and backward TFLOP/s
    at head dim 128, causal, 2k and 16k tokens, and whether the loader derived a series."""
    rows = []
    for kernel in attention.kernel_names():
        archs = attention.kernel_entry(kernel).get("archs", {})
        for arch in archs:
            t = attention.table(kernel, arch)
            if t is None:
                continue
            rates = [f"{t.rate(series, True, 128, s):.0f}" for series in ("fwd", "bwd")
                     for s in (2048, 16384)]
            rows.append([kernel, arch, *rates, "; ".join(sorted(t.derived)) or "published"])
        if not archs:
            what = ("flash3 on Hopper, flash2 elsewhere" if kernel == "auto"
                    else "priced op by op (GEMMs, softmax)")
            rows.append([kernel, "any", "-", "-", "-", "-", what])
    return format_table(["kernel", "arch", "fwd 2k", "fwd 16k", "bwd 2k", "bwd 16k",
                         "series (TFLOP/s, hdim 128, causal; docs/catalog.md)"], rows)


def _tf(value: float | None) -> float | None:
    return None if value is None else value / 1e12


TABLES = {"accelerators": accelerators_table, "attention": attention_table,
          "models": models_table, "reliability": reliability_table, "stacks": stacks_table,
          "topologies": topologies_table}
