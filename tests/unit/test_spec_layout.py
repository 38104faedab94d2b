"""check_layout (the sweep pre-check) and the placement of TP/CP/EP groups on scale-up domains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.perf import comm_plan
from simcluster.spec import Scenario, check_layout, load_scenario

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "scenarios" / "default.yaml")
# heads, kv_heads and ffn divisible by 3 and 16; seq_len by 2*3 and 2*4.
MODEL: dict[str, Any] = {"layers": 12, "hidden": 3072, "heads": 48, "vocab": 32000,
                         "seq_len": 3072, "bias": False}


def _doc(nodes: int = 3, model: dict[str, Any] | None = None, **par: Any) -> dict[str, Any]:
    return {"model": model or MODEL, "cluster": {"topology": "dgx-h100", "nodes": nodes},
            "parallelism": {"global_batch": 96, **par}}


def _key(doc: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as info:
        load_scenario(doc)
    return info.value.key


def test_tp_straddling_nodes_is_an_error_naming_tp() -> None:
    assert _key(_doc(tp=3)) == "parallelism.tp"
    assert _key(_doc(nodes=2, tp=16)) == "parallelism.tp"
    assert _key(_doc(tp=3, tp_across_nodes=True)) == "parallelism.tp"  # not whole domains
    assert load_scenario(_doc(nodes=2, tp=16, tp_across_nodes=True)).parallelism.tp == 16


def test_cp_and_ep_blocks_must_not_straddle_domains() -> None:
    assert _key(_doc(nodes=3, tp=2, cp=3)) == "parallelism.cp"
    assert load_scenario(_doc(nodes=4, tp=2, cp=4)).parallelism.cp == 4
    assert load_scenario(_doc(nodes=4, tp=8, cp=4)).parallelism.cp == 4  # CP over whole nodes
    moe = {**MODEL, "moe": {"experts": 12, "top_k": 2}}
    assert _key(_doc(nodes=3, model=moe, ep=3)) == "parallelism.ep"
    assert load_scenario(_doc(nodes=3, model=moe, ep=4)).parallelism.ep == 4
    assert _key(_doc(nodes=3, model=moe, ep=12)) == "parallelism.ep"  # 12 GPUs: 1.5 nodes


def test_tp_across_nodes_is_priced_over_the_scale_out_fabric() -> None:
    def tp_comm(tp: int) -> tuple[float, comm_plan.Groups]:
        s = load_scenario(_doc(nodes=2, tp=tp, tp_across_nodes=True, global_batch=16))
        g = comm_plan.groups(s)
        return sum(comm_plan.tp_layer_comm_s(s, g)), g

    inside, g8 = tp_comm(8)
    across, g16 = tp_comm(16)
    assert g8.tp is not None
    assert g8.tp.inter is None
    assert g8.tp.nodes == 1
    assert g16.tp is not None
    assert g16.tp.inter is not None
    assert g16.tp.nodes == 2
    assert across > inside


BASE = load_scenario(DEFAULT)


@pytest.mark.parametrize("layout", [
    {}, {"tp": 4}, {"tp": 8, "pp": 2}, {"tp": 1, "pp": 1}, {"tp": 2, "cp": 2},
    {"tp": 3}, {"tp": 16}, {"tp": 16, "tp_across_nodes": True}, {"pp": 3}, {"tp": 0},
    {"tp": "x"}, {"tpp": 2}, {"global_batch": 255}, {"dp": 3}, {"schedule": "interleaved"},
    {"zero_stage": 3}, {"pp": 1, "zero_stage": 3}, {"ep": 2}, {"cp": 4}, {"global_batch": 1e40},
    {"sequence_parallel": True, "tp": 1}, {"stage_layers": [16, 16]},
    {"stage_layers": [10, 10]}, {"micro_batch": 3},
])
def test_check_layout_agrees_with_the_loader(layout: dict[str, Any]) -> None:
    assert_same_verdict(BASE, DEFAULT, layout)


def assert_same_verdict(base: Scenario, path: str, layout: dict[str, Any]) -> None:
    """check_layout raises iff the loader raises for the same --set overrides, with the same key."""
    overrides = [f"parallelism.{k}={_yaml(v)}" for k, v in layout.items()]
    try:
        load_scenario(path, overrides)
        expected = None
    except SpecError as err:
        expected = err.key
    error: SpecError | None = None
    try:
        check_layout(base, **layout)
    except SpecError as err:
        error = err
    assert (error.key if error else None) == expected, (layout, error, expected)
    assert error is None or not error.source  # no file: the caller knows the base


def _yaml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def test_run_summary_says_when_a_layout_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml")
    assert main(["run", path, "--fast"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("DOES NOT FIT"))
    assert "GiB per GPU on stage" in line
    assert "80.0 GiB available" in line
    assert main(["run", path, "--fast", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits_in_memory"] is False
    assert data["peak_memory_gib"] > 80.0
    assert main(["run", DEFAULT, "--fast"]) == 0
    assert "DOES NOT FIT" not in capsys.readouterr().out


def test_a_job_inside_one_nvl72_domain_places_any_block() -> None:
    """64 GB200 (16 trays of one 72-GPU NVLink domain): EP64 and TP16 stay inside the domain, and
    the collective model prices them over NVLink; 144 GPUs (two domains) still refuse EP64."""
    moe = {**MODEL, "moe": {"experts": 64, "top_k": 2}}
    inside = load_scenario({**_doc(model=moe, ep=64, global_batch=128),
                            "cluster": {"topology": "gb200-nvl72", "nodes": 16}})
    g = comm_plan.groups(inside)
    assert g.ep is not None
    assert (g.ep.nodes, g.ep.inter) == (1, None)
    assert load_scenario({**_doc(tp=16, global_batch=128), "cluster": {
        "topology": "gb200-nvl72", "nodes": 16}}).parallelism.tp == 16
    assert _key({**_doc(model=moe, ep=64, global_batch=144), "cluster": {
        "topology": "gb200-nvl72", "nodes": 36}}) == "parallelism.ep"
