"""Cost modes: rent and buy, prices from the catalog, capital and energy shown; hand-computed oracles
and properties of perf.cost.training_cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.perf.cost import (
    NODE_POWER_OVER_GPU_TDP,
    SECONDS_PER_YEAR,
    network_usd,
    switch_ports,
    training_cost,
)
from simcluster.report.run import run_text
from simcluster.run.single import simulate
from simcluster.spec import load_scenario
from simcluster.spec.hardware import ScaleOutSpec
from simcluster.spec.scenario import CostSpec
from simcluster.spec.schema import parse

ROOT = Path(__file__).resolve().parents[2]
GPT3 = ROOT / "scenarios" / "gpt3-175b-1024xa100.yaml"
BOXES: dict[str, Any] = {
    "model": {"preset": "gpt3-1.7b", "layers": 4},
    "cluster": {"topology": "box-4x3090ti-nvlink", "nodes": 2},
    "parallelism": {"tp": 2, "pp": 2, "global_batch": 8},
    "training": {"tokens": 1.0e9},
    "cost": {"mode": "buy"},
}
HALF_YEAR_S = SECONDS_PER_YEAR / 2


def _buy(**extra: Any) -> CostSpec:
    return parse(CostSpec, {"node_price_usd": 9000, "amortisation_years": 3, **extra})


def _error(source: Any, overrides: list[str]) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_scenario(source, overrides)
    return info.value


# ------------------------------------------------------------------------------ perf.cost oracles


def test_rent_oracle() -> None:
    """16 GPUs for 10 h at $2.5: 160 GPU-hours, $400; no capital, no energy."""
    c = training_cost(3.6e4 * 1000.0, 1000.0, 16, 2, 700.0,
                      parse(CostSpec, {"rent_per_gpu_hour_usd": 2.5}))
    assert (c.time_s, c.gpu_hours, c.cost_usd) == (36000.0, 160.0, 400.0)
    assert c.capital_usd is None
    assert c.energy_usd is None


def test_buy_oracle() -> None:
    """4 nodes x $9,000 = $36,000 up front; half a year of a 3-year life = $6,000; energy
    4 x 2 kW x PUE 1.2 x 4,380 h = 42,048 kWh x $0.15 = $6,307.20."""
    cost = _buy(node_power_W=2000, pue=1.2, electricity_per_kWh_usd=0.15)
    c = training_cost(HALF_YEAR_S * 10.0, 10.0, 16, 4, 450.0, cost)
    assert c.time_s == HALF_YEAR_S
    assert c.capital_usd == 36000.0
    assert c.energy_usd == pytest.approx(6307.2, rel=1e-12)
    assert c.cost_usd == pytest.approx(6000.0 + 6307.2, rel=1e-12)


def test_buy_default_node_power_is_182_percent_of_gpu_tdp() -> None:
    """No node power: 1.82 x 4 x 450 W = 3,276 W per node; 1 node for 1,000 h at $0.10 = $327.60."""
    c = training_cost(3.6e6, 1.0, 4, 1, 450.0, _buy(electricity_per_kWh_usd=0.10))
    assert NODE_POWER_OVER_GPU_TDP == 1.82
    assert c.energy_usd == pytest.approx(327.6, rel=1e-12)


def test_no_cost_section() -> None:
    c = training_cost(1e9, 1e5, 8, 1, 700.0, None)
    assert (c.cost_usd, c.capital_usd, c.energy_usd) == (None, None, None)
    assert c.gpu_hours == pytest.approx(8 * 1e4 / 3600)


# ------------------------------------------------------------------------------------ properties

TIMES = st.floats(1.0, 1e9)
RATES = st.floats(0.0, 100.0)


@given(t1=TIMES, t2=TIMES, price=st.floats(1.0, 1e6), kwh=RATES, nodes=st.integers(1, 64))
def test_buy_cost_monotone_in_time_capital_independent(t1: float, t2: float, price: float,
                                                       kwh: float, nodes: int) -> None:
    cost = parse(CostSpec, {"node_price_usd": price, "electricity_per_kWh_usd": kwh})
    short, long = sorted((t1, t2))
    a = training_cost(short, 1.0, 8 * nodes, nodes, 700.0, cost)
    b = training_cost(long, 1.0, 8 * nodes, nodes, 700.0, cost)
    assert a.cost_usd is not None
    assert b.cost_usd is not None
    assert a.cost_usd <= b.cost_usd
    assert a.capital_usd == b.capital_usd == nodes * price


@given(t=TIMES, rate=RATES, gpus=st.integers(1, 4096))
def test_rent_cost_is_gpu_hours_times_rate_exactly(t: float, rate: float, gpus: int) -> None:
    c = training_cost(t, 1.0, gpus, 1, 700.0, parse(CostSpec, {"rent_per_gpu_hour_usd": rate}))
    assert c.cost_usd == c.gpu_hours * rate
    assert c.capital_usd is None


# --------------------------------------------------------------------- spec: modes and catalog


def test_todays_files_load_to_the_same_numbers() -> None:
    default = load_scenario(ROOT / "scenarios" / "default.yaml").cost
    assert default == CostSpec(mode="rent", rent_per_gpu_hour_usd=2.5)
    boxes = load_scenario(ROOT / "scenarios" / "gpt-10b-4x3090ti.yaml").cost
    # the scenario's own node price; the topology's switch-port price (docs/cost.md, "Network gear")
    assert boxes == CostSpec(mode="buy", node_price_usd=9000.0, amortisation_years=3.0,
                             electricity_per_kWh_usd=0.15, switch_port_usd=80.94)


def test_mode_buy_takes_node_price_and_power_from_the_topology() -> None:
    cost = load_scenario(BOXES).cost
    assert cost is not None
    assert (cost.mode, cost.node_price_usd, cost.node_power_W) == ("buy", 8998.0, None)
    cost = load_scenario(BOXES, ["cluster.topology=dgx-a100-40gb"]).cost
    assert cost is not None
    assert (cost.node_price_usd, cost.node_power_W) == (199000.0, 6500.0)


def test_mode_rent_takes_the_accelerator_rate() -> None:
    cost = load_scenario(BOXES, ["cluster.topology=dgx-h100",
                                 "cost=rent"]).cost
    assert cost is not None
    assert (cost.mode, cost.rent_per_gpu_hour_usd, cost.node_price_usd) == ("rent", 12.29, None)


def test_given_numbers_override_the_catalog() -> None:
    cost = load_scenario(BOXES, ["cluster.topology=dgx-a100-40gb",
                                 "cost.node_price_usd=150000", "cost.node_power_W=6000"]).cost
    assert cost is not None
    assert (cost.node_price_usd, cost.node_power_W) == (150000.0, 6000.0)
    cost = load_scenario(BOXES, ["cost=rent", "cost.rent_per_gpu_hour_usd=0.5"]).cost
    assert cost is not None
    assert cost.rent_per_gpu_hour_usd == 0.5


def test_shorthand_switches_a_rented_scenario_to_buying() -> None:
    s = load_scenario(GPT3, ["cost=buy"])
    assert s.cost is not None
    assert (s.cost.mode, s.cost.node_price_usd, s.cost.rent_per_gpu_hour_usd) == \
        ("buy", 199000.0, None)


def test_price_follows_a_topology_override() -> None:
    """The sweep's --set cluster.topology=...: the catalog price is the new topology's."""
    cost = load_scenario(BOXES, ["cluster.topology=box-2x3090ti-pcie"]).cost
    assert cost is not None
    assert cost.node_price_usd == 5000.0


def test_both_numbers_or_a_contradicting_mode_are_refused() -> None:
    err = _error(BOXES, ["cost.node_price_usd=1", "cost.rent_per_gpu_hour_usd=1"])
    assert err.key == "cost.rent_per_gpu_hour_usd"
    err = _error(GPT3, ["cost.mode=buy"])
    assert err.key == "cost.mode"
    assert err.source == "--set"
    assert "--set cost=buy" in err.message
    err = _error(BOXES, ["cost.mode=rent", "cost.node_price_usd=9000"])
    assert err.key == "cost.mode"


def test_missing_price_names_the_file_and_the_key_to_give() -> None:
    err = _error(BOXES, ["cluster.topology=dgx-h100"])
    assert err.key == "cost.mode"
    assert "topologies/dgx-h100.yaml" in err.message
    assert "cost.node_price_usd" in err.message
    err = _error(BOXES, ["cost=rent"])
    assert err.key == "cost.mode"
    assert "rtx-3090-ti" in err.message
    assert "cost.rent_per_gpu_hour_usd" in err.message


def test_no_number_no_mode_and_bad_shorthand() -> None:
    assert _error(BOXES, ["cost={amortisation_years: 3}"]).key == "cost.rent_per_gpu_hour_usd"
    err = _error(BOXES, ["cost=lease"])
    assert err.key == "cost"
    assert "rent | buy" in err.message
    with pytest.raises(SpecError) as info:
        parse(CostSpec, {"mode": "buy"}, "cost")
    assert info.value.key == "cost.mode"
    assert "cluster.topology" in info.value.message


# ------------------------------------------------------------------------------- run output


def test_run_output_has_capital_and_energy_when_buying() -> None:
    d = simulate(load_scenario(BOXES, ["cost.electricity_per_kWh_usd=0.2"]),
                 engine="analytical").to_dict()
    # two boxes on one switch: 2 NIC ports x $80.94 (topology's switch_port_usd); NICs unpriced
    assert d["network_usd"] == pytest.approx(2 * 80.94)
    assert d["network_unpriced"] == ["nics"]
    capital = 2 * 8998.0 + 2 * 80.94
    assert d["capital_usd"] == pytest.approx(capital)
    node_w = NODE_POWER_OVER_GPU_TDP * 4 * 450.0
    hours = d["time_to_train_days"] * 24
    assert d["energy_usd"] == pytest.approx(2 * node_w * hours / 1000 * 0.2, rel=1e-12)
    amortised = capital * d["time_to_train_days"] * 86400 / (4 * SECONDS_PER_YEAR)
    assert d["cost_usd"] == pytest.approx(amortised + d["energy_usd"], rel=1e-12)
    assert d["cash_usd"] == pytest.approx(capital + d["energy_usd"], rel=1e-12)
    assert ("cash $" + f"{capital + d['energy_usd']:,.0f} (capital $18,158 up front, of which "
            "network $162, nics not priced; + energy $") in run_text(d)


def test_run_output_capital_is_null_when_renting_or_without_tokens() -> None:
    d = simulate(load_scenario(GPT3), engine="analytical").to_dict()
    assert d["cost_usd"] == pytest.approx(d["gpu_hours"] * 1.8)
    assert (d["capital_usd"], d["energy_usd"], d["network_usd"]) == (None, None, None)
    assert d["cash_usd"] == d["cost_usd"]  # the rent is the cash the run needs
    assert "rent (the cash this run needs)" in run_text(d)
    assert "up front" not in run_text(d)
    d = simulate(load_scenario(BOXES, ["training.tokens=null"]), engine="analytical").to_dict()
    assert (d["cost_usd"], d["capital_usd"], d["energy_usd"]) == (None, None, None)


# ------------------------------------------------------------------------ cash and network gear


def _scale_out(**values: Any) -> ScaleOutSpec:
    return parse(ScaleOutSpec, {"nics_per_node": 8, "nic_Gbps": 400, "switch_radix": 64,
                                **values})


@pytest.mark.parametrize(("nodes", "values", "ports"), [
    (1, {}, 0),                                      # one node: no fabric
    (4, {"fabric": "single-switch"}, 32),            # every NIC on one switch
    (4, {}, 32),                                     # 32 NICs fill one 32-down-port leaf
    (16, {}, 128 * 3),                               # 4 leaves, 2 levels: E (1 + 2/1)
    (16, {"oversubscription": 2.0}, 128 * 2),        # E (1 + 2/2)
    (16, {"fabric": "rail-optimized"}, 128 * 3),     # 8 rails x 1 leaf: still a spine
    (2048, {}, 16384 * 5),                           # 512 leaves > radix 64: 3 levels, E (1 + 4)
])
def test_switch_ports_oracle(nodes: int, values: dict[str, Any], ports: int) -> None:
    assert switch_ports(nodes, _scale_out(**values)) == ports


def test_network_oracle_and_unpriced_parts() -> None:
    """16 DGX-like nodes: 128 NICs x $1,000 + 384 switch ports x $500 = $320,000."""
    out = _scale_out()
    cost = _buy(nic_usd=1000, switch_port_usd=500)
    assert network_usd(cost, 16, out) == (128 * 1000 + 384 * 500, ())
    assert network_usd(_buy(switch_port_usd=500), 16, out) == (384 * 500, ("nics",))
    assert network_usd(_buy(), 16, out) == (0.0, ("nics", "switch ports"))
    assert network_usd(cost, 1, out) == (0.0, ())
    c = training_cost(HALF_YEAR_S, 1.0, 128, 16, 700.0, cost, out)
    assert c.capital_usd == 16 * 9000 + 320_000
    assert c.cash_usd == c.capital_usd  # no electricity price
    assert c.cost_usd == pytest.approx(c.capital_usd / 6)  # half a year of three


@given(nodes=st.integers(1, 5000), more=st.integers(0, 5000), k=st.floats(1.0, 8.0),
       fabric=st.sampled_from(["fat-tree", "rail-optimized", "single-switch"]))
def test_switch_ports_cover_the_nics_and_grow_with_the_cluster(nodes: int, more: int, k: float,
                                                               fabric: str) -> None:
    out = _scale_out(fabric=fabric, oversubscription=k)
    assert switch_ports(nodes, out) >= (nodes * 8 if nodes > 1 else 0)
    assert switch_ports(nodes + more, out) >= switch_ports(nodes, out)


@given(t=st.floats(1.0, 10 * SECONDS_PER_YEAR), years=st.floats(0.5, 8.0),
       kwh=st.floats(0.0, 1.0))
def test_cash_minus_amortised_is_the_capital_not_yet_used(t: float, years: float, kwh: float) -> None:
    """cash - cost = capital x (1 - t / T): buying needs more cash than it is charged until the
    machines are written off."""
    cost = _buy(amortisation_years=years, electricity_per_kWh_usd=kwh)
    c = training_cost(t, 1.0, 16, 4, 700.0, cost)
    assert c.cash_usd is not None
    assert c.capital_usd is not None
    assert c.cost_usd is not None
    lifetime = years * SECONDS_PER_YEAR
    assert c.cash_usd - c.cost_usd == pytest.approx(c.capital_usd * (1 - t / lifetime),
                                                    rel=1e-9, abs=1e-6)


def test_network_prices_are_for_buying() -> None:
    err = _error(BOXES, ["cost=rent", "cost.rent_per_gpu_hour_usd=1", "cost.nic_usd=500"])
    assert err.key.endswith("cost.nic_usd")
    assert "a rented GPU-hour includes the network" in err.message
