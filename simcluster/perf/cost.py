"""Time, GPU-hours and money to train a token budget (docs/cost.md).

Rent: GPU-hours times the hourly rate. Buy: the share of the purchase price used up over the
amortisation period (straight-line), plus electricity for the nodes at the data centre's PUE; the
up-front purchase (the capital) and the electricity are reported as well.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        Rent: GPU-hours x rate. Buy: the amortised share of the purchase plus ``energy_usd``.
        None without a cost section.
    capital_usd : float or None
        Buy: nodes x node price, paid up front whatever the run's length. None when renting.
    energy_usd : float or None
        Buy: the electricity part of ``cost_usd``. None when renting.
    """

    time_s: float
    gpu_hours: float
    cost_usd: float | None
    capital_usd: float | None = None
    energy_usd: float | None = None


def training_cost(tokens: float, tokens_per_s: float, gpus: int, nodes: int, gpu_tdp_W: float,
                  cost: CostSpec | None) -> TrainingCost:
    """Time to train ``tokens``, GPU-hours, and cost under ``cost`` (None when no cost is given).

    ``time_s = tokens / tokens_per_s``; ``gpu_hours = gpus * time_s / 3600``.
    """
    time_s = tokens / tokens_per_s
    gpu_hours = gpus * time_s / 3600.0
    if cost is None:
        return TrainingCost(time_s=time_s, gpu_hours=gpu_hours, cost_usd=None)
    if cost.mode == "rent":
        return TrainingCost(time_s=time_s, gpu_hours=gpu_hours,
                            cost_usd=gpu_hours * rent_rate_usd(cost))
    capital = nodes * (cost.node_price_usd or 0.0)
    energy = energy_usd(cost, time_s, nodes, gpus, gpu_tdp_W)
    return TrainingCost(time_s=time_s, gpu_hours=gpu_hours,
                        cost_usd=amortised_usd(cost, capital, time_s) + energy,
                        capital_usd=capital, energy_usd=energy)


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
