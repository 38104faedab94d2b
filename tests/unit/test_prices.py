"""Price data: every price section of the catalog and the topologies is dated and cited, parsed
strictly (units, required date and source), and the planning scenario's options all load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.spec import load_scenario, load_topology
from simcluster.spec.hardware import AcceleratorPriceSpec, NodePriceSpec, TopologySpec
from simcluster.spec.schema import dump, parse

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "scenarios" / "plan-10b-300b.yaml"
SOURCE = "https://example.org/price-page"


def _error(cls: type[Any], raw: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse(cls, raw, "price")
    return info.value


def test_catalog_prices_as_published() -> None:
    """The numbers of docs/cost.md, each with its date."""
    h100 = load_topology("dgx-h100")
    assert h100.accelerator.price is not None
    assert h100.accelerator.price.rent_per_gpu_hour_usd == 12.29        # 98.32 / 8
    assert h100.accelerator.price.as_of == "2023-07"
    assert h100.price is not None
    assert h100.price.node_usd is None
    assert h100.price.node_power_W == 10200.0
    a100 = load_topology("dgx-a100-40gb")
    assert a100.accelerator.price is not None
    assert a100.accelerator.price.rent_per_gpu_hour_usd == pytest.approx(32.77 / 8, abs=1e-3)
    assert a100.price is not None
    assert a100.price.node_usd == 199000.0
    assert a100.price.node_power_W == 6500.0
    box = load_topology("box-4x3090ti-nvlink")
    assert box.accelerator.price is not None
    assert box.accelerator.price.buy_usd == 1999.0
    assert box.price is not None
    assert box.price.node_usd == 5000 + 2 * 1999
    pair = load_topology("box-2x3090ti-pcie").price
    assert pair is not None
    assert (pair.node_usd, pair.node_power_W, pair.as_of) == (5000, None, "2022")


@pytest.mark.parametrize("name", catalog.names("topologies"))
def test_every_price_is_dated_and_cited(name: str) -> None:
    topo = load_topology(name)
    for price in (topo.price, topo.accelerator.price):
        if price is None:
            continue
        assert price.as_of[:2] in ("19", "20")
        assert len(price.source) > 20
        if "estimate" not in price.source:
            assert "http" in price.source or "seed document" in price.source


def test_estimates_say_so() -> None:
    """The 4x box price is derived from the seed's 2x box and the GPU MSRP: marked estimate."""
    for name in ("box-4x3090ti-nvlink", "box-4x3090ti-pcie", "dgx-a100-80gb"):
        price = load_topology(name).price
        assert price is not None
        assert price.source.startswith("estimate")


def test_price_needs_date_and_source() -> None:
    assert _error(AcceleratorPriceSpec, {"buy_usd": 1999, "source": SOURCE}).key == "price.as_of"
    assert _error(NodePriceSpec, {"node_usd": 5000, "as_of": "2022"}).key == "price.source"
    err = _error(NodePriceSpec, {"node_usd": 5000, "as_of": "2022", "source": "  "})
    assert err.key == "price.source"


def test_price_date_format() -> None:
    for as_of in ("2022", "2022-03", "2022-03-29"):
        assert parse(NodePriceSpec, {"node_usd": 1, "as_of": as_of, "source": SOURCE}).as_of == as_of
    for bad in ("March 2022", "2022-13", "22-03", "2022-03-32", ""):
        err = _error(NodePriceSpec, {"node_usd": 1, "as_of": bad, "source": SOURCE})
        assert err.key == "price.as_of"
        assert "YYYY" in err.message


def test_price_needs_a_number_and_units() -> None:
    assert _error(AcceleratorPriceSpec, {"as_of": "2022", "source": SOURCE}).key == "price.buy_usd"
    assert _error(NodePriceSpec, {"as_of": "2022", "source": SOURCE}).key == "price.node_usd"
    assert _error(NodePriceSpec, {"node_usd": 0, "as_of": "2022", "source": SOURCE}).key \
        == "price.node_usd"
    err = _error(NodePriceSpec, {"node_power_kW": 6.5, "as_of": "2022", "source": SOURCE})
    assert err.key == "price.node_power_kW"
    err = _error(NodePriceSpec, {"node_usd": 1, "cost": 2, "as_of": "2022", "source": SOURCE})
    assert "unknown key" in err.message


def test_topology_file_price_error_names_the_file(tmp_path: Path) -> None:
    raw = catalog.entry("topologies", "dgx-a100-40gb")
    raw["price"] = {"node_usd": 199000}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError) as info:
        load_topology(path)
    assert info.value.key == "price.as_of"
    assert str(path) in str(info.value)


def test_price_round_trips() -> None:
    topo = load_topology("dgx-a100-40gb")
    assert parse(TopologySpec, dump(topo)) == topo


def _plan_overrides() -> list[list[str]]:
    sweep = catalog.load_yaml_file(PLAN)["sweep"]
    out: list[list[str]] = []
    for option in sweep["options"]:
        fixed = [f"{k}={v}" for k, v in option["set"].items() if not isinstance(v, list)]
        swept = [(k, v) for k, v in option["set"].items() if isinstance(v, list)]
        assert len(swept) == 1
        key, values = swept[0]
        out.extend([*fixed, f"{key}={v}"] for v in values)
    return out


@pytest.mark.parametrize("overrides", _plan_overrides(), ids=" ".join)
def test_every_planning_option_loads(overrides: list[str]) -> None:
    s = load_scenario(PLAN, overrides)
    assert s.cost is not None
    assert s.training.tokens == 3.0e11
    if s.cost.mode == "buy":
        assert s.cluster.topology.price is not None
        assert s.cost.node_price_usd == s.cluster.topology.price.node_usd
        assert s.cost.electricity_per_kWh_usd == 0.15     # kept: options switch cost.mode only
    else:
        assert s.cost.rent_per_gpu_hour_usd == 12.29


def test_planning_scenario_sweep_shape() -> None:
    sweep = catalog.load_yaml_file(PLAN)["sweep"]
    assert [o["name"] for o in sweep["options"]] == [
        "3090ti-nvlink-boxes", "3090ti-pcie-boxes", "dgx-a100", "rented-h100"]
    assert sweep["layouts"] == "search"
    assert sweep["objective"] == "cost_usd"
    assert sweep["constraints"] == {"max_days": 365}
    assert sweep["top"] == 10
