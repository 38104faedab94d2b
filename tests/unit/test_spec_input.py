"""Loader input handling: non-UTF-8 files, duplicate keys, units on preset refinements, absurd
counts, ``checkpoint: none``, the libyaml parser and the parsed-file cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from simcluster import catalog, yamlio
from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.spec import dump_scenario, load_scenario, load_topology, schema
from simcluster.spec.scenario import CheckpointSpec, Scenario

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "scenarios" / "default.yaml"
YAML_FILES = sorted([*ROOT.glob("scenarios/*.yaml"), *ROOT.glob("topologies/*.yaml"),
                     *ROOT.glob("simcluster/catalog/*.yaml")])


def _error(source: object, overrides: tuple[str, ...] = ()) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_scenario(source, overrides)  # type: ignore[arg-type]
    return info.value


def test_binary_scenario_is_a_spec_error_naming_the_file(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "blob.yaml"
    path.write_bytes(b"model: \xff\xfe\x00\x89PNG\r\n")
    err = _error(path)
    assert err.source == str(path)
    assert "not UTF-8 text" in err.message
    assert "0xff" in err.message
    assert main(["validate", str(path)]) == 2
    assert "not UTF-8 text" in capsys.readouterr().err


def test_binary_topology_file_is_a_spec_error_naming_it(tmp_path: Path) -> None:
    topo = tmp_path / "topo.yaml"
    topo.write_bytes(bytes(range(128, 256)))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: llama-3-8b\ncluster: {topology: topo.yaml, nodes: 2}\n"
                        "parallelism: {tp: 2, global_batch: 16}\n")
    err = _error(scenario)
    assert err.source == str(topo)
    assert "not UTF-8 text" in err.message
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_topology(topo)


def test_duplicate_key_names_the_file_and_the_key_path(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DEFAULT.read_text().replace("  tp: 2\n", "  tp: 2\n  pp: 1\n  tp: 4\n"))
    err = _error(path)
    assert (err.source, err.key) == (str(path), "parallelism.tp")  # the first repeat
    assert "given twice" in err.message
    assert "lines" in err.message


def test_duplicate_key_inside_a_list_and_a_topology(tmp_path: Path) -> None:
    with pytest.raises(yamlio.DuplicateKeyError) as info:
        yamlio.load("a:\n  - {x: 1}\n  - {y: 1, y: 2}\n")
    assert info.value.path == "a[1].y"
    topo = tmp_path / "t.yaml"
    topo.write_text((ROOT / "topologies" / "dgx-h100.yaml").read_text()
                    + "gpus_per_node: 8\n")
    with pytest.raises(SpecError) as err:
        load_topology(topo)
    assert (err.value.source, err.value.key) == (str(topo), "gpus_per_node")


def test_merge_keys_are_not_duplicates() -> None:
    data = yamlio.load("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n")
    assert data["derived"] == {"x": 1, "y": 3}


def test_libyaml_parser_when_available_and_identical_to_pure_python() -> None:
    if getattr(yaml, "__with_libyaml__", False):
        assert issubclass(yamlio.Loader, yaml.CSafeLoader)

    class PureLoader(yaml.SafeLoader):
        yaml_implicit_resolvers = yamlio.Loader.yaml_implicit_resolvers

    assert YAML_FILES
    for path in YAML_FILES:
        text = path.read_text("utf-8")
        assert yamlio.load(text) == yaml.load(text, Loader=PureLoader), path
    assert yamlio.load("a: 1e12\nb: 3.0e11\nc: .inf\nd: 0x10\ne: '1e3'") == {
        "a": 1e12, "b": 3.0e11, "c": float("inf"), "d": 16, "e": "1e3"}


def test_parsed_file_cache_hands_out_copies_and_sees_edits(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(DEFAULT.read_text())
    first = catalog.load_yaml_file(path)
    first["parallelism"]["tp"] = 99
    assert catalog.load_yaml_file(path)["parallelism"]["tp"] == 2
    path.write_text(DEFAULT.read_text().replace("  tp: 2\n", "  tp: 4\n"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert load_scenario(path).parallelism.tp == 4


@pytest.mark.parametrize("override", [
    "cluster.topology.scale_up.latency_ms=0.005",
    "cluster.topology.scale_up.latency_s=5e-6",
])
def test_preset_refinement_in_another_unit_replaces_the_preset_value(override: str) -> None:
    s = load_scenario(DEFAULT, [override])
    assert s.cluster.topology.scale_up.latency_s == pytest.approx(5e-6, rel=1e-12)
    assert s.cluster.topology.name == "dgx-h100+custom"


def test_inline_preset_refinement_with_other_units() -> None:
    doc = {"model": "llama-3-8b",
           "cluster": {"nodes": 2, "topology": {
               "preset": "dgx-h100", "scale_up": {"latency_ms": 0.01},
               "accelerator": {"memory_GB": 80}}},
           "parallelism": {"tp": 2, "global_batch": 16}}
    topo = load_scenario(doc).cluster.topology
    assert topo.scale_up.latency_s == pytest.approx(1e-5)
    assert topo.accelerator.memory_bytes == 80e9


def test_one_quantity_twice_in_one_mapping_is_still_an_error() -> None:
    doc = {"model": "llama-3-8b",
           "cluster": {"nodes": 2, "topology": {
               "preset": "dgx-h100", "scale_up": {"latency_ms": 0.01, "latency_us": 3}}},
           "parallelism": {"tp": 2, "global_batch": 16}}
    assert "given twice" in _error(doc).message


@pytest.mark.parametrize(("override", "key", "text"), [
    ("parallelism.global_batch=1e40", "parallelism.global_batch", "2**53"),
    ("parallelism.global_batch=2199023255552", "parallelism.global_batch", "<= 1099511627776"),
    ("parallelism.global_batch=.nan", "parallelism.global_batch", "expected an integer"),
    ("parallelism.global_batch=.inf", "parallelism.global_batch", "expected an integer"),
    ("parallelism.tp=1e40", "parallelism.tp", "2**53"),
    ("cluster.nodes=1e300", "cluster.nodes", "2**53"),
    ("model.layers=-.inf", "model.layers", "expected an integer"),
])
def test_absurd_counts_are_refused_naming_key_and_limit(override: str, key: str, text: str) -> None:
    err = _error(DEFAULT, (override,))
    assert err.key == key
    assert text in err.message
    assert err.source == "--set"


def test_checkpoint_none_differs_from_an_absent_section() -> None:
    absent = load_scenario(DEFAULT)
    assert absent.checkpoint is None
    none = load_scenario(DEFAULT, ["checkpoint=none"])
    assert isinstance(none.checkpoint, CheckpointSpec)
    assert none.checkpoint.disabled
    assert load_scenario(DEFAULT, ["checkpoint.mode=none"]) == none
    assert not load_scenario(DEFAULT, ["checkpoint.mode=sync"]).checkpoint.disabled  # type: ignore[union-attr]
    dumped = dump_scenario(none)
    assert dumped["checkpoint"]["mode"] == "none"
    assert schema.parse(Scenario, dumped) == none
    err = _error(DEFAULT, ("checkpoint=never",))
    assert err.key == "checkpoint"
    assert "mapping or none" in err.message


_BOMB = ("a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
         + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)))


@pytest.mark.parametrize(("text", "problem"), [
    (_BOMB, "expands to more than 100000 nodes"),
    ("model: " + "[" * 70 + "]" * 70 + "\n", "nests deeper than 64 levels"),
    ("model: " + "[" * 5000 + "]" * 5000 + "\n", "nests deeper than 64 levels"),
    ("model: &m [1, *m]\n", "recursive structure"),
])
def test_alias_bombs_deep_and_recursive_documents_are_spec_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str) -> None:
    path = tmp_path / "shape.yaml"
    path.write_text(text)
    err = _error(path)
    assert err.source == str(path)
    assert problem in err.message
    assert main(["validate", str(path)]) == 2
    assert problem in capsys.readouterr().err


def test_shared_aliases_within_the_limits_still_load() -> None:
    data = yamlio.load("a: &a {b: 1}\nc: *a\nd: [*a, *a]\n")
    assert data == {"a": {"b": 1}, "c": {"b": 1}, "d": [{"b": 1}, {"b": 1}]}
    nine_levels = "x: " + "[" * 9 + "1" + "]" * 9
    assert yamlio.load(nine_levels) == {"x": [[[[[[[[[1]]]]]]]]]}


#: The indented case is 3.1 MB, under the 4 MiB file limit, so the nesting check is what refuses it.
@pytest.mark.parametrize("text", ["model: " + "[" * 100_000 + "]" * 100_000 + "\n",
                                  "model:\n" + "".join(" " * i + "-\n" for i in range(2500)),
                                  "- " * 100_000 + "1\n"])
def test_nesting_that_would_overflow_the_c_parser_is_refused_before_composing(
        tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    assert yamlio._nesting_bound(text) > yamlio.SCAN_ABOVE
    assert "nests deeper than 64 levels" in _error(path).message
