"""``simcluster sweep`` and ``simcluster.sweep``: output, errors, options, the later passes."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcluster
from simcluster.cli import main
from simcluster.run.single import simulate
from simcluster.spec import load_scenario
from tests.tiny import tiny_scenario

SCENARIO: dict[str, Any] = tiny_scenario("tiny-sweep")
SEARCH = ["--search", "recompute=none,full", "--search", "schedule=1f1b,interleaved",
          "--search", "micro_batch=1,2,4", "--search", "zero_stage=0,1"]


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _sweep_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["sweep", *args, "--quiet", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("sweep"), SCENARIO)


def test_sweep_prints_table_pareto_and_rejections(tiny: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tiny), *SEARCH, "--top", "3", "--quiet",
                 "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert all(part in text for part in ("best 3", "Pareto front", "rejected"))
    assert "parallelism.sequence_parallel" in text  # sp with tp=1 is a counted rejection


def test_best_equals_a_single_run_of_its_layout(tiny: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = _sweep_json(capsys, str(tiny), *SEARCH, "--out", str(tmp_path / "o"))
    best = out["top"][0]
    run = simulate(load_scenario(tiny, _overrides(best)), engine="analytical").to_dict()
    assert run["iteration_time_s"] == best["step_time_s"]
    assert run["cost_usd"] == best["cost_usd"]
    assert [r["rank"] for r in out["top"]] == list(range(1, len(out["top"]) + 1))
    times = [r["step_time_s"] for r in out["top"]]
    assert times == sorted(times)


def _overrides(row: dict[str, Any]) -> list[str]:
    keys = ("tp", "pp", "cp", "ep", "micro_batch", "schedule", "virtual_stages", "recompute",
            "sequence_parallel", "zero_stage", "tp_across_nodes")
    items = [f"parallelism.{k}={json.dumps(row[k])}" for k in keys]
    layers = row["stage_layers"]
    return [*items, f"parallelism.stage_layers={'[' + layers + ']' if layers else 'null'}"]


@functools.cache
def _best_step(path: str) -> float:
    return float(simcluster.sweep(path, search=SEARCH[1::2])["step_time_s"].iloc[0])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]),
       mb=st.sampled_from([1, 2, 4]), rec=st.sampled_from(["none", "full"]),
       zero=st.sampled_from([0, 1]))
def test_no_single_run_beats_the_sweep(tiny: Path, tp: int, pp: int, mb: int, rec: str,
                                       zero: int) -> None:
    best = _best_step(str(tiny))
    items = [f"parallelism.{k}={v}" for k, v in
             {"tp": tp, "pp": pp, "micro_batch": mb, "recompute": rec, "zero_stage": zero,
              "schedule": "1f1b"}.items()]
    try:
        run = simulate(load_scenario(tiny, items), engine="analytical").to_dict()
    except simcluster.SpecError:
        return
    if run["fits_in_memory"]:
        assert run["iteration_time_s"] >= best


def test_library_call_returns_a_ranked_dataframe(tiny: Path) -> None:
    frame = simcluster.sweep(str(tiny), search=SEARCH[1::2], top=5)
    assert list(frame["rank"][:3]) == [1, 2, 3]
    assert frame["step_time_s"].is_monotonic_increasing
    assert frame.attrs["rejections"]
    assert frame.attrs["evaluated"] >= len(frame)


@pytest.mark.parametrize(("args", "needle"), [
    (["--vary", "parallelism.tp=1,2"], "--vary: parallelism.tp is a layout axis"),
    (["--vary", "model.bogus=1,2"], "bogus"),
    (["--search", "tp=0"], "--search: tp: 0 is not one of a positive integer"),
    (["--search", "bogus=1"], "--search: 'bogus' is not a layout axis"),
    (["--vary", "cluster.nodes"], "--vary: expected KEY=V1,V2"),
    (["--objective", "goodput"], "--objective: goodput ranks the layouts the reliability pass"),
    (["--goodput", "2"], "--goodput: needs the scenario's reliability section"),
    (["--gpus", "12"], "--gpus: 12 is not a whole number of nodes of 8 GPUs"),
])
def test_bad_flags_exit_2_with_one_line(tiny: Path, capsys: pytest.CaptureFixture[str],
                                        args: list[str], needle: str) -> None:
    assert main(["sweep", str(tiny), *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(("section", "needle"), [
    ({"bogus": 1}, "sweep.bogus: unknown key"),
    ({"options": [{"name": "a"}, {"name": "a"}]}, "sweep.options[1].name"),
    ({"constraints": {"max_days": -1}}, "sweep.constraints.max_days: expected a number >= 0"),
    ({"constraints": {"memory_headroom_gib": "lots"}},
     "sweep.constraints.memory_headroom_gib: expected GiB >= 0 or auto, got 'lots'"),
    ({"objective": "speed"}, "sweep.objective: 'speed' is not one of"),
    ({"objective": ["cost_usd"]}, "sweep.objective: ['cost_usd'] is not one of"),
    ({"rerank": 5000}, "sweep.rerank: 5000 is more than 1000"),
    ({"options": [{"name": "big", "set": {"cluster.nodes": "many"}}]}, "cluster.nodes"),
])
def test_bad_sweep_section_names_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              section: dict[str, Any], needle: str) -> None:
    path = _write(tmp_path, {**SCENARIO, "sweep": section})
    assert main(["sweep", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1
    assert str(path) in err or "sweep/--vary" in err


def test_options_from_the_file_compare_hardware(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    section = {"options": [{"name": "a100", "set": {"cluster.nodes": [1, 2]}},
                           {"name": "h100", "set": {"cluster.topology": "dgx-h100",
                                                    "cluster.nodes": 1}}],
               "search": {"recompute": ["none"], "schedule": ["1f1b"], "zero_stage": [1]},
               "objective": "cost_usd", "top": 4}
    path = _write(tmp_path, {**SCENARIO, "sweep": section})
    out = _sweep_json(capsys, str(path), "--out", str(tmp_path / "o"))
    options = {r["option"] for r in out["top"]} | {r["option"] for r in out["pareto"]}
    assert options <= {"a100", "h100"}
    nodes = {r["nodes"] for r in out["top"] if r["option"] == "a100"}
    assert nodes <= {1, 2}
    costs = [r["cost_usd"] for r in out["top"]]
    assert costs == sorted(costs)
    assert main(["sweep", str(path), "--quiet", "--out", str(tmp_path / "o")]) == 0
    assert "best per option" in capsys.readouterr().out


def test_des_rerank_retimes_the_best(tiny: Path, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    out = _sweep_json(capsys, str(tiny), *SEARCH, "--rerank", "3", "--out", str(tmp_path / "o"))
    engines = [r.get("engine") for r in out["top"][:3]]
    assert engines == ["des"] * 3
    first = out["top"][0]
    assert first["analytical_step_time_s"] > 0
    run = simulate(load_scenario(tiny, _overrides(first))).to_dict()  # DES, as `simcluster run`
    assert run["iteration_time_s"] == first["step_time_s"]


def test_validate_checks_the_sweep_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path, {**SCENARIO, "sweep": {"vary": {"cluster.nodes": [1, 2]}}}, "good.yaml")
    assert main(["validate", str(good)]) == 0
    assert "# sweep: 2 settings" in capsys.readouterr().err
    bad = _write(tmp_path, {**SCENARIO, "sweep": {"vary": {"cluster.nodes": [0]}}}, "bad.yaml")
    assert main(["validate", str(bad)]) == 2
    assert "cluster.nodes" in capsys.readouterr().err


def test_a_sweep_too_large_is_refused_up_front(capsys: pytest.CaptureFixture[str]) -> None:
    planning = str(Path(__file__).resolve().parents[2] / "scenarios" / "plan-10b-300b.yaml")
    assert main(["sweep", planning, "--vary", "cluster.nodes=8,16,32", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "candidate layouts; a sweep takes at most 2,500,000" in err


def test_huge_clusters_are_refused_not_enumerated(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the CLI fuzz test: a 1e40-node option once walked the divisors of 8e40."""
    section = {"options": [{"name": "huge", "set": {"cluster.nodes": [10**40]}}]}
    path = _write(tmp_path, {**SCENARIO, "sweep": section})
    assert main(["validate", str(path)]) == 2
    assert "(sweep option 'huge')" in capsys.readouterr().err
    doc = {**SCENARIO, "cluster": {"topology": "dgx-a100-80gb", "nodes": 2**19},
           "parallelism": {"global_batch": 2**22}}
    assert main(["sweep", str(_write(tmp_path, doc, "big.yaml")), "--quiet"]) == 2
    assert "a layout search takes at most 2,097,152" in capsys.readouterr().err


def test_non_layout_parallelism_keys_and_nulls_can_be_varied(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Found while writing the tutorial: --vary parallelism.global_batch was refused, and a null
    among varied values crashed the tables (an int and a str in one column)."""
    out = _sweep_json(capsys, str(tiny_path(tmp_path)), *SEARCH,
                      "--vary", "parallelism.global_batch=64,128", "--out", str(tmp_path / "o"))
    assert {r["parallelism.global_batch"] for r in out["top"]} <= {64, 128}
    fixed = _sweep_json(capsys, str(tiny_path(tmp_path)), "--layouts", "fixed",
                        "--vary", "parallelism.tp=1,2", "--out", str(tmp_path / "f"))
    assert sorted(r["tp"] for r in fixed["top"]) == [1, 2]
    doc = {**SCENARIO, "sweep": {"layouts": "fixed",
                                 "vary": {"training.tokens": [1.0e9, None]}}}
    mixed = _sweep_json(capsys, str(_write(tmp_path, doc, "n.yaml")), "--out", str(tmp_path / "n"))
    assert {r["training.tokens"] for r in mixed["top"]} == {1.0e9, None}


def tiny_path(tmp_path: Path) -> Path:
    return _write(tmp_path, SCENARIO, "tiny.yaml")
