"""Every shipped topology and scenario file loads, carries its schema key, and validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster import catalog, yamlio
from simcluster.spec import load_scenario, load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = sorted((ROOT / "topologies").glob("*.yaml"))
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.stem)
def test_topology_file(path: Path) -> None:
    raw = yamlio.load(path.read_text())
    assert raw["schema"] == "simcluster/topology/v1"
    assert raw["name"] == path.stem
    topo = load_topology(path)
    assert topo.name == path.stem
    assert load_topology(path.stem) == topo


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_file(path: Path) -> None:
    assert yamlio.load(path.read_text())["schema"] == "simcluster/scenario/v1"
    assert load_scenario(path).cluster.gpus >= 1


def test_required_presets_exist() -> None:
    required = {
        "accelerators": {"a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200",
                         "mi300x", "v100-sxm", "rtx-3090-ti", "rtx-4090"},
        "topologies": {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "hgx-h200", "dgx-b200",
                       "box-2x3090ti-pcie", "box-2x3090ti-nvlink", "box-4x3090ti-pcie",
                       "box-4x3090ti-nvlink"},
        "models": {"gpt3-175b", "gpt3-1.7b", "gpt3-1t", "llama-2-7b", "llama-2-70b", "llama-3-8b",
                   "llama-3-70b", "llama-3-405b", "bloom-176b", "mixtral-8x7b"},
    }
    for kind, names in required.items():
        assert names <= set(catalog.names(kind)), kind


def test_default_scenario_exists() -> None:
    assert (ROOT / "scenarios" / "default.yaml").is_file()
