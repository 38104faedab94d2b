"""A caller that changes what the catalog hands out never changes the catalog (issue 15)."""

from __future__ import annotations

from typing import Any

from simcluster import catalog
from simcluster.perf.collectives_calibration import link_classes, parse_class


def test_entry_is_a_deep_copy_of_the_preset() -> None:
    first = catalog.entry("accelerators", "h100-sxm")
    peak = dict(first["peak_TFLOPS"])
    first["peak_TFLOPS"]["bf16"] = -1.0  # nested mapping
    first["name"] = "changed"
    again = catalog.entry("accelerators", "h100-sxm")
    assert again["peak_TFLOPS"] == peak
    assert again["name"] == "h100-sxm"


def test_stack_lists_and_nested_flags_are_copies() -> None:
    first = catalog.entry("stacks", "megatron-2021")
    flags = dict(first["execution"])
    notes = list(first["not_modelled"])
    first["execution"]["flash_attention"] = True
    first["not_modelled"].append("everything")
    again = catalog.entry("stacks", "megatron-2021")
    assert again["execution"] == flags
    assert again["not_modelled"] == notes


def test_entries_of_a_whole_file_are_copies() -> None:
    found: dict[str, dict[str, Any]] = catalog.entries("collectives")
    name = next(n for n, raw in found.items() if "nvswitch" in raw.get("kinds", ()))
    kinds = list(found[name]["kinds"])
    found[name]["kinds"].clear()
    found[name]["protocols"]["LL"]["efficiency"] = 1e-9
    del found[next(iter(found))]
    again = catalog.entries("collectives")
    assert again[name]["kinds"] == kinds
    assert parse_class(name, again[name]) in link_classes()
    assert len(again) == len(found) + 1


def test_topology_presets_are_copies() -> None:
    first = catalog.entry("topologies", "dgx-h100")
    first.clear()
    assert catalog.entry("topologies", "dgx-h100")
