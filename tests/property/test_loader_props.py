"""Loader properties: arbitrary input never escapes as anything but SpecError with a key path,
and resolve -> dump -> load is the identity."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster import catalog, yamlio
from simcluster.errors import SpecError
from simcluster.spec import dump_scenario, load_scenario, to_yaml
from tests.unit.test_spec_layout import BASE, DEFAULT, assert_same_verdict

VALID: dict[str, Any] = {
    "model": "gpt3-7.5b",
    "cluster": {"topology": "dgx-a100-80gb", "nodes": 4},
    "parallelism": {"tp": 4, "pp": 2, "global_batch": 64},
}
KEYS = ["model", "layers", "hidden", "heads", "kv_heads", "cluster", "topology", "nodes",
        "parallelism", "tp", "pp", "dp", "global_batch", "scale_up", "bandwidth_GBps", "preset",
        "accelerator", "peak_TFLOPS", "bf16", "reliability", "classes", "share", "cost", "moe",
        "stage_layers", "precision", "schedule", "training", "tokens", "x", ""]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                    st.sampled_from(["gpt3-175b", "dgx-h100", "h100-sxm", "1f1b", "bf16"]))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
    max_leaves=20,
)


def _check_spec_error(doc: Any, overrides: list[str] | None = None) -> None:
    try:
        load_scenario(doc, overrides or [])
    except SpecError as err:  # success is allowed; any other exception fails the test
        error = err
    else:
        return
    _check_message(error)


def _check_message(err: SpecError) -> None:
    assert err.source in ("<inline>", "--set")
    assert err.key != "" or err.source == "--set", str(err)
    assert err.message
    assert "\n" not in str(err)


@given(st.dictionaries(st.sampled_from(KEYS), documents, max_size=6))
def test_arbitrary_documents_raise_only_spec_errors(doc: dict[str, Any]) -> None:
    _check_spec_error(doc)


@given(st.lists(st.tuples(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4), documents),
                max_size=3))
def test_arbitrary_overrides_raise_only_spec_errors(items: list[tuple[list[str], Any]]) -> None:
    overrides = [f"{'.'.join(path)}={to_yaml({'v': value})[3:].strip()}" for path, value in items]
    _check_spec_error(VALID, overrides)


@given(st.lists(st.text(max_size=20), max_size=3))
def test_arbitrary_override_text_raises_only_spec_errors(overrides: list[str]) -> None:
    _check_spec_error(VALID, overrides)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def valid_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    model = draw(st.sampled_from(["gpt3-1.7b", "gpt3-7.5b", "llama-2-7b", "llama-3-8b"]))
    topo = draw(st.sampled_from(["dgx-a100-80gb", "dgx-h100", "box-4x3090ti-nvlink"]))
    nodes = draw(st.sampled_from([1, 2, 4]))
    gpus_per_node = 4 if topo.startswith("box") else 8
    tp = draw(st.sampled_from([d for d in _divisors(gpus_per_node) if d <= 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    dp = nodes * gpus_per_node // tp // pp
    if dp < 1:
        pp, dp = 1, nodes * gpus_per_node // tp
    return {
        "name": draw(st.text(min_size=1, max_size=10)),
        "seed": draw(st.integers(0, 2**32)),
        "model": {"preset": model, "seq_len": draw(st.sampled_from([1024, 2048, 4096]))},
        "cluster": {"topology": {"preset": topo, "scale_out": {
            "latency_us": draw(st.floats(0, 100)), "oversubscription": draw(st.floats(1, 8))}},
            "nodes": nodes},
        "parallelism": {"tp": tp, "pp": pp, "global_batch": dp * draw(st.integers(1, 64)),
                        "recompute": draw(st.sampled_from(["none", "selective", "full"]))},
        "training": {"tokens": draw(st.floats(1e6, 1e13))},
        "checkpoint": {"interval_min": draw(st.floats(0.5, 600)),
                       "storage_write_GBps": draw(st.floats(0.1, 1e4))},
    }


@given(valid_scenarios())
def test_resolve_dump_load_is_identity(doc: dict[str, Any]) -> None:
    scenario = load_scenario(doc)
    dumped = dump_scenario(scenario)
    assert load_scenario(dumped) == scenario
    assert load_scenario(yamlio.load(to_yaml(dumped))) == scenario


def test_every_model_preset_loads() -> None:
    for name in catalog.names("models"):
        doc = {**VALID, "model": name, "parallelism": {"tp": 1, "pp": 1, "global_batch": 32}}
        assert load_scenario(doc).model.name == name


@given(st.text(max_size=200))
def test_arbitrary_yaml_text_files_raise_only_spec_errors(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_scenario(path)
        except SpecError as err:  # success is allowed; any other exception fails the test
            error = err
        else:
            return
    assert error.source == str(path)
    assert "\n" not in str(error)


LAYOUT_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "tp": st.sampled_from([1, 2, 3, 4, 8, 16, 0]),
    "pp": st.sampled_from([1, 2, 3, 4, 8]),
    "cp": st.sampled_from([1, 2, 3, 4]),
    "ep": st.sampled_from([1, 2]),
    "dp": st.sampled_from([1, 2, 4, 8]),
    "micro_batch": st.sampled_from([1, 2, 3]),
    "global_batch": st.sampled_from([1, 16, 255, 256, 512, 2**41, 1e40]),
    "schedule": st.sampled_from(["1f1b", "interleaved", "gpipe", "zb-h1"]),
    "virtual_stages": st.sampled_from([1, 2, 4]),
    "sequence_parallel": st.booleans(),
    "recompute": st.sampled_from(["none", "full"]),
    "zero_stage": st.integers(0, 3),
    "tp_across_nodes": st.booleans(),
}


@given(st.fixed_dictionaries({}, optional=LAYOUT_VALUES))
@settings(max_examples=300, deadline=None)
def test_check_layout_raises_iff_the_loader_raises_with_the_same_key(layout: dict[str, Any]) -> None:
    assert_same_verdict(BASE, DEFAULT, layout)
