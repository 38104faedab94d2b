"""Text summary of a topology for ``simcluster topology show``."""

from __future__ import annotations

import dataclasses
from typing import Any

from simcluster.spec.hardware import TopologySpec
from simcluster.topology import TopologySummary
from simcluster.units import GB


def summary_dict(topo: TopologySpec, s: TopologySummary) -> dict[str, Any]:
    """The summary as plain JSON-ready values (SI units, as in the dataclass)."""
    return {"topology": topo.name, "accelerator": topo.accelerator.name, **dataclasses.asdict(s)}


def summary_text(topo: TopologySpec, s: TopologySummary) -> str:
    """Human-readable lines: GPUs, per-GPU scale-up and scale-out, injection and bisection."""
    up = topo.scale_up
    out = topo.scale_out
    lines = [
        f"topology      {topo.name}: {topo.description}".rstrip(": "),
        f"accelerator   {topo.accelerator.name}",
        f"nodes         {s.nodes} x {topo.gpus_per_node} GPUs = {s.gpus} GPUs",
        f"scale-up      {up.kind}, {_gbs(s.scale_up_Bps_per_gpu)} per GPU per direction"
        f"{', NVLS' if up.nvls else ''}",
        f"scale-out     {out.nics_per_node} x {out.nic_Bps * 8 / GB:g} Gb/s NICs per node, "
        f"{out.fabric}, oversubscription {out.oversubscription:g}:1",
        f"              {_gbs(s.scale_out_Bps_per_gpu)} "
        f"({s.scale_out_Bps_per_gpu * 8 / GB:g} Gb/s) per GPU per direction",
        f"injection     {_gbs(s.injection_Bps)} total per direction",
        f"bisection     {_gbs(s.bisection_Bps)} per direction",
        f"graph         {s.switches} switches, {s.links} links",
    ]
    return "\n".join(lines)


def _gbs(value: float) -> str:
    return f"{value / GB:,.6g} GB/s"
