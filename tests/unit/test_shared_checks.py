"""Input checks written once and used everywhere they apply (issue 15: repeated input checks)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from simcluster.errors import InvariantError, SpecError, check_choice
from simcluster.flows.tier_b import FlowModel
from simcluster.horizon.config import HorizonConfig
from simcluster.horizon.montecarlo import run_replicas
from simcluster.perf.collectives import collective_time, comm_group
from simcluster.perf.collectives_formulas import bus_factor
from simcluster.sim import GpuSlowdown, LinkDegradation, Perturbations, simulate_step
from simcluster.spec import schema
from simcluster.spec.loader import load_scenario, load_topology
from tests.tiny import tiny_scenario


def test_check_choice_returns_the_value_or_names_key_choices_and_file() -> None:
    assert check_choice("engine", "des", ("des", "analytical")) == "des"
    with pytest.raises(SpecError) as err:
        check_choice("sweep.layouts", "grid", ("search", "fixed"), "s.yaml")
    assert str(err.value) == "s.yaml: sweep.layouts: 'grid' is not one of search, fixed"
    with pytest.raises(SpecError, match="None is not one of"):
        check_choice("--contention", None, ("auto", "off"))


def test_horizon_engine_names_are_checked_like_the_others() -> None:
    with pytest.raises(SpecError) as err:
        run_replicas(HorizonConfig(nodes=1, work_s=1.0), 1, 0, engine="bogus")
    assert err.value.key == "engine"
    assert err.value.message == "'bogus' is not one of fast, simpy"


@pytest.mark.parametrize(("op", "nbytes", "key"), [("all_shuffle", 1e6, "collective.op"),
                                                   ("all_reduce", -1.0, "collective.nbytes"),
                                                   ("all_reduce", math.nan, "collective.nbytes")])
def test_both_tiers_refuse_a_bad_request_with_the_same_error(op: str, nbytes: float,
                                                             key: str) -> None:
    topo = load_topology("dgx-h100")
    with pytest.raises(SpecError) as tier_a:
        collective_time(op, nbytes, comm_group(topo, 16, 1))
    with pytest.raises(SpecError) as tier_b:
        FlowModel(topo, 2).collective_time(op, nbytes, 16)
    assert tier_a.value.key == tier_b.value.key == key
    assert tier_a.value.message == tier_b.value.message


def test_bus_factor_refuses_an_unknown_op() -> None:
    with pytest.raises(SpecError, match="unknown 'all_shuffle'"):
        bus_factor("all_shuffle", 8)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _UnitWithoutSuffix:
    size: float = schema.spec_field(1.0, unit="GiB")  # a bytes field must be named size_bytes


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _UnsupportedType:
    ratio: complex = schema.spec_field(1j)


def test_a_malformed_spec_class_is_an_internal_error_not_bad_input() -> None:
    """The schema's own classes are code: a misnamed or mistyped field is a bug (exit 1)."""
    with pytest.raises(InvariantError, match="must end in _bytes"):
        schema.parse(_UnitWithoutSuffix, {"size_GiB": 1})
    with pytest.raises(InvariantError, match="unsupported field type"):
        schema.parse(_UnsupportedType, {"ratio": 2})


@pytest.mark.parametrize(("section", "entry", "key"), [
    ("gpu_slowdown", {"node": 2, "gpu": 0, "factor": 0.5}, "gpu_slowdown[0].node"),
    ("gpu_slowdown", {"node": 0, "gpu": 8, "factor": 0.5}, "gpu_slowdown[0].gpu"),
    ("link_bandwidth", {"layer": "scale_out", "node": 5, "factor": 0.5},
     "link_bandwidth[0].node"),
])
def test_loader_and_des_check_perturbations_with_one_function(section: str,
                                                              entry: dict[str, Any],
                                                              key: str) -> None:
    """The same out-of-range entry, from a scenario file or passed to the DES, is the same error."""
    with pytest.raises(SpecError) as loaded:
        load_scenario(tiny_scenario("p", perturbations={section: [entry]}))
    values = (GpuSlowdown(entry["node"], entry["gpu"], entry["factor"]),) \
        if section == "gpu_slowdown" else \
        (LinkDegradation(entry["layer"], entry["node"], entry["factor"]),)
    pert = Perturbations(**{section: values})
    with pytest.raises(SpecError) as simulated:
        simulate_step(load_scenario(tiny_scenario("p")), perturbations=pert)
    assert loaded.value.key == simulated.value.key == f"perturbations.{key}"
    assert loaded.value.message == simulated.value.message


def test_the_des_refuses_what_the_loader_refuses_by_field_bounds() -> None:
    """Factors and layers are field bounds in the scenario; the DES's own values get the same."""
    tiny = load_scenario(tiny_scenario("p"))
    with pytest.raises(SpecError, match=r"gpu_slowdown\[0\].factor"):
        simulate_step(tiny, perturbations=Perturbations(gpu_slowdown=(GpuSlowdown(0, 0, 1.5),)))
    with pytest.raises(SpecError, match=r"link_bandwidth\[0\].factor"):
        simulate_step(tiny, perturbations=Perturbations(
            link_bandwidth=(LinkDegradation("scale_up", None, math.nan),)))
