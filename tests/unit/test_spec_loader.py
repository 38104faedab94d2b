"""spec loader: strict keys, units converted once, presets, derived values, overrides, checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simcluster.errors import SpecError
from simcluster.spec import dump_scenario, load_scenario, load_topology

BASE: dict[str, Any] = {
    "model": "gpt3-175b",
    "cluster": {"topology": "dgx-a100-80gb", "nodes": 128},
    "parallelism": {"tp": 8, "pp": 16, "global_batch": 1536},
}


def _error(overrides: list[str], base: dict[str, Any] | None = None) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_scenario(base or BASE, overrides)
    return info.value


def test_units_converted_to_si_once() -> None:
    s = load_scenario(BASE)
    topo = s.cluster.topology
    assert topo.scale_up.bandwidth_Bps == 300e9          # bandwidth_GBps: 300
    assert topo.scale_out.nic_Bps == 200e9 / 8           # nic_Gbps: 200
    assert topo.accelerator.memory_bytes == 80 * 2**30   # memory_GiB: 80
    assert topo.accelerator.peak_flops_per_s["bf16"] == 312e12


def test_derived_values_filled() -> None:
    s = load_scenario(BASE)
    assert s.parallelism.dp == 8
    assert s.parallelism.micro_batches == 1536 // 8
    assert s.model.kv_heads == 96
    assert s.model.ffn_hidden == 4 * 12288
    assert s.cluster.gpus == 1024


def test_preset_with_overrides_keeps_the_rest() -> None:
    s = load_scenario({**BASE, "model": {"preset": "gpt3-175b", "layers": 48}},
                      ["parallelism.pp=8"])
    assert s.model.layers == 48
    assert s.model.hidden == 12288
    assert s.model.name == "gpt3-175b"


def test_set_refines_a_preset_name() -> None:
    s = load_scenario(BASE, ["model.seq_len=4096", "cluster.topology.scale_out.oversubscription=2"])
    assert s.model.seq_len == 4096
    assert s.model.layers == 96
    assert s.cluster.topology.scale_out.oversubscription == 2.0
    assert s.cluster.topology.scale_up.bandwidth_Bps == 300e9


def test_round_trip_is_identity() -> None:
    s = load_scenario(BASE, ["parallelism.recompute=full"])
    assert load_scenario(dump_scenario(s)) == s


@pytest.mark.parametrize(
    ("override", "key", "fragment"),
    [
        ("model.hiden=1", "model.hiden", "did you mean 'hidden'"),
        ("cluster.topology.scale_up.bandwidth_GiB=300", "cluster.topology.scale_up.bandwidth_GiB",
         "expected one of bandwidth_Bps, bandwidth_GBps"),
        ("cluster.topology.scale_up.bandwidth_GBps=-300", "cluster.topology.scale_up.bandwidth_GBps",
         "must be > 0"),
        ("parallelism.tp=5", "parallelism.tp", "5 does not divide heads=96"),
        ("parallelism.tp=3", "parallelism.tp", "48 does not divide the 1024 GPUs"),
        ("parallelism.pp=5", "parallelism.pp", "does not divide the 1024 GPUs"),
        ("parallelism.dp=16", "parallelism.dp", "inconsistent"),
        ("parallelism.global_batch=1001", "parallelism.global_batch", "micro_batch*dp"),
        ("parallelism.tp=16", "parallelism.tp", "scale-up domain"),
        ("parallelism.schedule=zigzag", "parallelism.schedule", "gpipe | 1f1b"),
        ("parallelism.virtual_stages=2", "parallelism.virtual_stages", "interleaved"),
        ("parallelism.ep=2", "parallelism.ep", "mixture-of-experts"),
        ("parallelism.zero_stage=3", "parallelism.zero_stage", "pp=16"),
        ("precision=fp8", "precision", "not supported by a100-sxm-80gb"),
        ("model=gpt3-17b", "model", "unknown model preset"),
        ("model.layers=ninety", "model.layers", "expected an integer"),
        ("parallelism.sequence_parallel=1", "parallelism.sequence_parallel", "true or false"),
    ],
)
def test_errors_name_key_and_expectation(override: str, key: str, fragment: str) -> None:
    err = _error([override])
    assert err.key == key
    assert fragment in err.message
    assert err.source == "--set"


def test_interleaving_needs_a_pipeline() -> None:
    err = _error(["parallelism.pp=1", "parallelism.schedule=interleaved",
                  "parallelism.virtual_stages=2"])
    assert err.key == "parallelism.schedule"
    assert "needs pp >= 2" in err.message


def test_pp_must_divide_layers_unless_stages_are_stated() -> None:
    err = _error(["cluster.nodes=112", "parallelism.pp=14", "parallelism.global_batch=1536"])
    assert err.key == "parallelism.pp"
    assert "does not divide layers=96" in err.message
    ok = load_scenario(BASE, ["cluster.nodes=112", "parallelism.pp=14",
                              "parallelism.stage_layers=[6,7,7,7,7,7,7,7,7,7,7,7,7,6]",
                              "parallelism.global_batch=1568"])
    assert ok.parallelism.stage_layers is not None
    assert sum(ok.parallelism.stage_layers) == 96


def test_stage_layers_must_sum_to_layers() -> None:
    err = _error(["parallelism.stage_layers=[6,6,6,6,6,6,6,6,6,6,6,6,6,6,6,5]"])
    assert err.key == "parallelism.stage_layers"
    assert "expected layers=96" in err.message


def test_stage_layers_need_one_entry_per_stage() -> None:
    err = _error(["parallelism.stage_layers=[48,48]"])
    assert err.key == "parallelism.stage_layers"
    assert err.message == "has 2 entries, expected pp*virtual_stages = 16"


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("model: gpt3-175b\ncluster: {topology: dgx-a100-80gb, nodes: 128}\n"
                    "parallelism: {tp: 8, pp: 16, global_batch: 1536, micro_batchs: 2}\n")
    with pytest.raises(SpecError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: parallelism.micro_batchs: unknown key")


def test_invalid_yaml_is_a_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_scenario(path)


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_topology_file_reference_is_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text(
        "name: my\naccelerator: h100-sxm\ngpus_per_node: 4\n"
        "scale_up: {kind: nvswitch, bandwidth_GBps: 450}\n")
    doc = {**BASE, "cluster": {"topology": "my.yaml", "nodes": 1},
           "parallelism": {"tp": 4, "pp": 1, "global_batch": 8}}
    path = tmp_path / "s.yaml"
    path.write_text(__import__("yaml").safe_dump(doc))
    s = load_scenario(path)
    assert s.cluster.topology.name == "my"
    assert s.cluster.gpus == 4


def test_error_in_referenced_topology_names_that_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad-topo.yaml"
    bad.write_text("accelerator: h100-sxm\ngpus_per_node: 4\nscale_up: {kind: nvswich, "
                   "bandwidth_GBps: 450}\n")
    with pytest.raises(SpecError) as info:
        load_scenario({**BASE, "cluster": {"topology": str(bad), "nodes": 1}})
    assert info.value.source == str(bad)
    assert info.value.key == "scale_up.kind"


def test_yaml12_floats_in_files(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("model: gpt3-175b\ncluster: {topology: dgx-a100-80gb, nodes: 128}\n"
                    "parallelism: {tp: 8, pp: 16, global_batch: 1536}\ntraining: {tokens: 3e11}\n")
    assert load_scenario(path).training.tokens == 3e11


def test_load_topology_preset() -> None:
    topo = load_topology("dgx-h100")
    assert topo.gpus_per_node == 8
    assert topo.scale_up.bandwidth_Bps == 450e9
    assert topo.scale_out.nic_Bps == 50e9


def test_override_syntax_errors() -> None:
    assert "KEY=VALUE" in _error(["parallelism.tp"]).message
    assert _error(["model.name.x=1"]).key == "model.name"


def test_reliability_shares_must_sum_to_one() -> None:
    err = _error(["reliability.classes={gpu: {share: 0.5}, network: {share: 0.2}}"])
    assert err.key == "reliability.classes"


def test_cost_needs_rent_or_buy() -> None:
    assert _error(["cost.amortisation_years=3"]).key == "cost.rent_per_gpu_hour_usd"
