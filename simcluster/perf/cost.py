"""Time, GPU-hours and money to train a token budget.

Rent: GPU-hours times the hourly rate. Buy: the share of the purchase price used up over the
amortisation period (straight-line), plus electricity for the nodes at the data centre's PUE.
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
    """Wall-clock time, GPU-hours and cost of training ``tokens`` at a steady throughput."""

    time_s: float
    gpu_hours: float
    cost_usd: float | None


def training_cost(tokens: float, tokens_per_s: float, gpus: int, nodes: int, gpu_tdp_W: float,
                  cost: CostSpec | None) -> TrainingCost:
    """Time to train ``tokens``, GPU-hours, and cost under ``cost`` (None when no cost is given).

    ``time_s = tokens / tokens_per_s``; ``gpu_hours = gpus * time_s / 3600``.
    """
    time_s = tokens / tokens_per_s
    gpu_hours = gpus * time_s / 3600.0
    return TrainingCost(time_s=time_s, gpu_hours=gpu_hours,
                        cost_usd=None if cost is None else _cost_usd(cost, time_s, gpu_hours,
                                                                     nodes, gpus, gpu_tdp_W))


def _cost_usd(cost: CostSpec, time_s: float, gpu_hours: float, nodes: int, gpus: int,
              gpu_tdp_W: float) -> float:
    if cost.rent_per_gpu_hour_usd is not None:
        return gpu_hours * cost.rent_per_gpu_hour_usd
    price = cost.node_price_usd or 0.0
    amortised = nodes * price * time_s / (cost.amortisation_years * SECONDS_PER_YEAR)
    node_power = cost.node_power_W or NODE_POWER_OVER_GPU_TDP * gpu_tdp_W * gpus / nodes
    energy_kWh = nodes * node_power * cost.pue * time_s / 3600.0 / 1000.0
    return amortised + energy_kWh * cost.electricity_per_kWh_usd
