"""Calibration classes of the Tier A collective model, read from ``catalog/collectives.yaml``.

A *platform class* (``nvlink3-nvswitch``, ``pcie4``, ``ib-ndr-400`` ...) holds, per NCCL protocol
(LL, LL128, Simple, and NVLS where the switch reduces), the per-call overhead, the per-step latency,
the achieved fraction of line rate and the ramp size below which the time stops falling
(docs/collectives.md, "Calibration"). Classes are matched to a topology by typed fields (layer,
scale-up kind and line rate), never by names. :meth:`LinkClass.at` turns a class and a per-rank
line rate into the effective numbers the formulas take.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from simcluster import catalog, units
from simcluster.errors import SpecError

#: NCCL protocols, lowest latency first (NCCL ``src/graph/tuning.cc`` base latencies).
PROTOCOLS = ("LL", "LL128", "Simple")
LAYERS = ("scale_up", "scale_out")


@dataclass(frozen=True, slots=True)
class ProtocolCost:
    """Effective cost numbers of one protocol on one path, per rank.

    Attributes
    ----------
    protocol : str
        ``LL``, ``LL128``, ``Simple`` or ``NVLS``.
    alpha_s : float
        Per-call overhead (launch, synchronisation), seconds.
    step_s : float
        Latency of one algorithm step (ring hop), seconds.
    bandwidth_Bps : float
        Achieved bandwidth per rank (efficiency x line rate), bytes/s per direction.
    ramp_bytes : float
        Messages below this size cost as much as this size (NCCL's channel reduction).
    """

    protocol: str
    alpha_s: float
    step_s: float
    bandwidth_Bps: float
    ramp_bytes: float


@dataclass(frozen=True, slots=True)
class ProtocolFit:
    """Calibrated protocol numbers of a class: like :class:`ProtocolCost` with an efficiency."""

    protocol: str
    alpha_s: float
    step_s: float
    efficiency: float
    ramp_bytes: float

    def at(self, line_Bps: float) -> ProtocolCost:
        """The cost on a path of per-rank line rate ``line_Bps`` (bytes/s)."""
        return ProtocolCost(self.protocol, self.alpha_s, self.step_s,
                            self.efficiency * line_Bps, self.ramp_bytes)


@dataclass(frozen=True, slots=True)
class LinkCost:
    """A group's effective numbers on one layer (intra-node or inter-node).

    Attributes
    ----------
    link_class : str
        Calibration class name.
    line_Bps : float
        Per-rank line rate on this layer, bytes/s per direction.
    protocols : tuple[ProtocolCost, ...]
        LL, LL128 and Simple, in that order.
    nvls : ProtocolCost | None
        NVLink SHARP all-reduce cost (bus bandwidth) where the switch reduces.
    """

    link_class: str
    line_Bps: float
    protocols: tuple[ProtocolCost, ...]
    nvls: ProtocolCost | None


@dataclass(frozen=True, slots=True)
class LinkClass:
    """One calibration entry of ``collectives.yaml``.

    Attributes
    ----------
    name : str
        Class name (the YAML key).
    layer : str
        ``scale_up`` or ``scale_out``.
    kinds : tuple[str, ...]
        Scale-up kinds it applies to (``nic`` for scale-out classes).
    line_Bps : float
        The line rate it was calibrated at (matching key), bytes/s per direction.
    protocols : tuple[ProtocolFit, ...]
        LL, LL128 and Simple.
    nvls : ProtocolFit | None
        NVLS (efficiency = bus bandwidth over line rate).
    source : str
        Provenance.
    """

    name: str
    layer: str
    kinds: tuple[str, ...]
    line_Bps: float
    protocols: tuple[ProtocolFit, ...]
    nvls: ProtocolFit | None
    source: str
    link_latency_s: float = 0.0

    def at(self, line_Bps: float, nvls: bool = True, latency_s: float | None = None) -> LinkCost:
        """Effective numbers at per-rank line rate ``line_Bps``; NVLS only when ``nvls``. A link
        of ``latency_s`` (the topology's) moves every step, and NVLS's per-call latency, by its
        difference from the class's ``link_latency_s``, not below zero."""
        shift = 0.0 if latency_s is None else latency_s - self.link_latency_s
        switch = self.nvls.at(line_Bps) if (nvls and self.nvls is not None) else None
        if switch is not None:  # NVLS crosses the link to the switch and back once per call
            switch = dataclasses.replace(switch, alpha_s=max(0.0, switch.alpha_s + shift))
        protocols = tuple(dataclasses.replace(c, step_s=max(0.0, c.step_s + shift))
                          for c in (p.at(line_Bps) for p in self.protocols))
        return LinkCost(self.name, line_Bps, protocols, switch)


def _fit(key: str, protocol: str, raw: Any, step_s: float) -> ProtocolFit:
    """One protocol entry ``{alpha_us, efficiency, ramp_bytes}``."""
    if not isinstance(raw, dict) or set(raw) != {"alpha_us", "efficiency", "ramp_bytes"}:
        raise SpecError(key, "needs exactly alpha_us, efficiency and ramp_bytes")
    eff = float(raw["efficiency"])
    if eff <= 0:
        raise SpecError(f"{key}.efficiency", f"must be > 0, got {eff}")
    return ProtocolFit(protocol, units.to_si(float(raw["alpha_us"]), "us"), step_s, eff,
                       float(raw["ramp_bytes"]))


def parse_class(name: str, raw: dict[str, Any]) -> LinkClass:
    """A :class:`LinkClass` from its YAML mapping (``SpecError`` naming the key when malformed)."""
    key = f"collectives.{name}"
    if raw.get("layer") not in LAYERS:
        raise SpecError(f"{key}.layer", f"expected one of {', '.join(LAYERS)}")
    steps = raw.get("step_us", {})
    protos = raw.get("protocols", {})
    if set(steps) != set(PROTOCOLS) or set(protos) != set(PROTOCOLS):
        raise SpecError(key, f"step_us and protocols need exactly {', '.join(PROTOCOLS)}")
    fits = tuple(_fit(f"{key}.protocols.{p}", p, protos[p], units.to_si(float(steps[p]), "us"))
                 for p in PROTOCOLS)
    nvls = _fit(f"{key}.nvls", "NVLS", raw["nvls"], 0.0) if raw.get("nvls") else None
    if not isinstance(raw.get("link_latency_us"), (int, float)) or raw["link_latency_us"] < 0:
        raise SpecError(f"{key}.link_latency_us", "expected the link latency in us (>= 0) the "
                        "class's steps assume")
    return LinkClass(name, str(raw["layer"]), tuple(str(k) for k in raw.get("kinds", ())),
                     units.to_si(float(raw["line_GBps"]), "GBps"), fits, nvls,
                     str(raw.get("source", "")),
                     units.to_si(float(raw["link_latency_us"]), "us"))


@cache
def link_classes() -> tuple[LinkClass, ...]:
    """Every class of the packaged ``collectives.yaml``."""
    return tuple(parse_class(name, raw) for name, raw in catalog.entries("collectives").items())


def match_class(layer: str, kind: str, line_Bps: float) -> LinkClass:
    """The class of ``layer`` and ``kind`` whose calibration line rate is nearest to ``line_Bps``.

    Nearest in ratio (``|log(line/class line)|``), so a 400 Gb/s NIC maps to NDR and 100 Gb/s to the
    100 GbE class. ``SpecError`` when no class covers the kind.
    """
    found = [c for c in link_classes() if c.layer == layer and kind in c.kinds]
    if not found:
        raise SpecError(f"{layer}.kind", f"no collective calibration for {kind!r} "
                        "(simcluster/catalog/collectives.yaml)")
    return min(found, key=lambda c: abs(math.log(line_Bps / c.line_Bps)))
