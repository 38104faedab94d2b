"""Time, GPU-hours and money to train a token budget (docs/cost.md).

Rent: GPU-hours times the hourly rate, which is also the cash the run needs. Buy: the capital
(the nodes, and their scale-out NICs and switch ports when the job spans nodes) is paid up front
whatever the run's length; the cost charged to the run is the share of it used up over the
amortisation period (straight-line) plus electricity for the nodes at the data centre's PUE, and
the cash the run needs is the capital plus that electricity. Both are reported side by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcluster.spec.hardware import ScaleOutSpec
from simcluster.spec.scenario import CostSpec

SECONDS_PER_YEAR = 365.0 * 86400.0
#: Node power over the sum of GPU TDPs when ``cost.node_power_W`` is not given: a DGX H100 is
#: specified at ~10.2 kW max for 8 x 700 W GPUs (NVIDIA DGX H100 datasheet), a ratio of 1.82.
NODE_POWER_OVER_GPU_TDP = 1.82


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingCost:
    """Wall-clock time, GPU-hours and cost of training ``tokens`` at a steady throughput.

    Attributes
    ----------
    cost_usd : float or None
        Rent: GPU-hours x rate. Buy: the amortised share of the capital plus ``energy_usd``.
        None without a cost section.
    cash_usd : float or None
        The money the run needs: the rent, or the capital plus the electricity when buying.
    capital_usd : float or None
        Buy: nodes x node price plus ``network_usd``, paid up front. None when renting.
    network_usd : float or None
        Buy: the scale-out NICs and switch ports of a job spanning nodes that have a price (part
        of the capital); None when renting.
    network_unpriced : tuple of str
        Buy, on more than one node: ``"nics"`` and/or ``"switch ports"`` without a price.
    energy_usd : float or None
        Buy: the electricity part of ``cost_usd``. None when renting.
    """

    time_s: float
    gpu_hours: float
    cost_usd: float | None
    cash_usd: float | None = None
    capital_usd: float | None = None
    network_usd: float | None = None
    network_unpriced: tuple[str, ...] = ()
    energy_usd: float | None = None


def training_cost(tokens: float, tokens_per_s: float, gpus: int, nodes: int, gpu_tdp_W: float,
                  cost: CostSpec | None, scale_out: ScaleOutSpec | None = None) -> TrainingCost:
    """Time to train ``tokens``, GPU-hours, and cost under ``cost`` (None when no cost is given).

    ``time_s = tokens / tokens_per_s``; ``gpu_hours = gpus * time_s / 3600``. ``scale_out`` (the
    topology's) counts the network gear a bought multi-node cluster needs (:func:`network_usd`).
    """
    time_s = tokens / tokens_per_s
    gpu_hours = gpus * time_s / 3600.0
    if cost is None:
        return TrainingCost(time_s=time_s, gpu_hours=gpu_hours, cost_usd=None)
    if cost.mode == "rent":
        rent = gpu_hours * rent_rate_usd(cost)
        return TrainingCost(time_s=time_s, gpu_hours=gpu_hours, cost_usd=rent, cash_usd=rent)
    network, unpriced = (network_usd(cost, nodes, scale_out) if scale_out is not None
                         else (0.0, ()))
    capital = nodes * (cost.node_price_usd or 0.0) + network
    energy = energy_usd(cost, time_s, nodes, gpus, gpu_tdp_W)
    return TrainingCost(time_s=time_s, gpu_hours=gpu_hours,
                        cost_usd=amortised_usd(cost, capital, time_s) + energy,
                        cash_usd=capital + energy, capital_usd=capital, network_usd=network,
                        network_unpriced=unpriced, energy_usd=energy)


def switch_ports(nodes: int, scale_out: ScaleOutSpec) -> int:
    """Switch ports a fabric of ``nodes`` uses (docs/cost.md, "Network gear").

    ``E = nodes x nics_per_node`` NIC ports. One node needs no fabric (0). A single switch, or
    one leaf, has ``E`` ports. Leaves have ``radix / 2`` downlinks (``topology/fabric.py``): a fat
    tree fills ``ceil(E / (radix / 2))`` of them, a rail-optimized fabric
    ``nics_per_node x ceil(nodes / (radix / 2))``. With two to ``radix`` leaves a two-level tree
    adds ``E / k`` leaf uplinks and as many spine ports, ``k`` the oversubscription:
    ``E (1 + 2 / k)``; beyond, a three-level Clos adds a core layer: ``E (1 + 4 / k)`` (Al-Fares
    et al., SIGCOMM'08: every switch-to-switch link uses two ports).
    """
    endpoints = nodes * scale_out.nics_per_node
    if nodes <= 1 or endpoints == 0 or scale_out.fabric == "single-switch":
        return 0 if nodes <= 1 else endpoints
    leaf = max(1, scale_out.switch_radix // 2)
    leaves = (scale_out.nics_per_node * math.ceil(nodes / leaf)
              if scale_out.fabric == "rail-optimized" else math.ceil(endpoints / leaf))
    if leaves == 1:
        return endpoints
    layers = 2 if leaves <= scale_out.switch_radix else 4
    return math.ceil(endpoints * (1 + layers / scale_out.oversubscription))


def network_usd(cost: CostSpec, nodes: int, scale_out: ScaleOutSpec
                ) -> tuple[float, tuple[str, ...]]:
    """The NICs and switch ports of a bought cluster of ``nodes``: ``nodes x nics_per_node x
    nic_usd + switch_ports x switch_port_usd`` over the parts with a price, and the parts without
    one (``"nics"``, ``"switch ports"``); ``(0, ())`` on one node (no fabric)."""
    nics, ports = nodes * scale_out.nics_per_node, switch_ports(nodes, scale_out)
    if nodes <= 1 or nics == 0:
        return 0.0, ()
    parts = (("nics", nics, cost.nic_usd), ("switch ports", ports, cost.switch_port_usd))
    priced = sum(count * price for _, count, price in parts if price is not None)
    return priced, tuple(name for name, _, price in parts if price is None)


def rent_rate_usd(cost: CostSpec) -> float:
    """The rent per GPU-hour (the loader fills it from the catalog when only ``mode`` is given)."""
    return cost.rent_per_gpu_hour_usd or 0.0


def amortised_usd(cost: CostSpec, capital_usd: float, time_s: float) -> float:
    """Straight-line share of ``capital_usd`` used up in ``time_s``: capital x time / lifetime."""
    return capital_usd * time_s / (cost.amortisation_years * SECONDS_PER_YEAR)


def energy_usd(cost: CostSpec, time_s: float, nodes: int, gpus: int, gpu_tdp_W: float) -> float:
    """Electricity: nodes x node power x PUE x hours x price per kWh.

    Node power is ``cost.node_power_W`` (the topology's ``price.node_power_W`` when buying from the
    catalog), else ``NODE_POWER_OVER_GPU_TDP`` x the node's GPU TDPs.
    """
    node_power = cost.node_power_W or NODE_POWER_OVER_GPU_TDP * gpu_tdp_W * gpus / nodes
    energy_kWh = nodes * node_power * cost.pue * time_s / 3600.0 / 1000.0
    return energy_kWh * cost.electricity_per_kWh_usd
