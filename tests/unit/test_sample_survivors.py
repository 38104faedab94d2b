"""Behaviour that issue 24's random mutation sample found unchecked (benchmarks/README.md,
"The random sample"): each test states the behaviour and its oracle, worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simcluster.errors import SpecError
from simcluster.horizon.records import parabola_vertex
from simcluster.perf.memory import estimate_memory
from simcluster.report.html_sweep import layout
from simcluster.report.run import run_text
from simcluster.run.single import simulate
from simcluster.spec.loader import load_scenario
from simcluster.sweep.evaluate import memory_refusal
from simcluster.sweep.store import ResultStore
from simcluster.topology.collective_groups import double_binary_tree
from simcluster.units import GiB


def test_parabola_vertex_of_an_asymmetric_bracket() -> None:
    """y = -(x - 2)^2 through x = 0, 1, 3: the vertex is at 2 (not the middle point 1); a
    parabola open upwards (a >= 0) has no maximum: the middle point."""
    assert parabola_vertex((0.0, 1.0, 3.0), (-4.0, -1.0, -1.0)) == pytest.approx(2.0)
    assert parabola_vertex((0.0, 1.0, 3.0), (-1.0, -4.0, -16.0)) == 0.0  # -(x+1)^2: clamped to x0
    assert parabola_vertex((0.0, 1.0, 3.0), (4.0, 1.0, 1.0)) == 1.0


def test_a_flat_headroom_of_zero_says_no_headroom() -> None:
    scenario = load_scenario({"model": "gpt3-1.7b", "precision": "bf16",
                              "cluster": {"topology": {"preset": "dgx-a100-80gb",
                                                       "accelerator": {"memory_GiB": 20}},
                                          "nodes": 2},
                              "parallelism": {"global_batch": 1024, "micro_batch": 4}})
    memory = estimate_memory(scenario)  # 32.6 GiB against 20
    assert memory_refusal(memory, 0.0) == (f"needs {memory.peak_bytes / GiB:.1f} GiB per GPU, "
                                           "20.0 GiB available")


def test_run_text_total_row_is_the_whole_step() -> None:
    d = simulate(load_scenario("scenarios/default.yaml"), engine="analytical").to_dict()
    total = next(line for line in run_text(d).splitlines() if line.startswith("total"))
    assert total.split()[-1] == "100.0%"


def test_sweep_page_layout_names_sequence_parallelism() -> None:
    row: dict[str, Any] = {"tp": 2, "pp": 4, "cp": 1, "dp": 8, "ep": 1, "micro_batch": 1,
                           "schedule": "1f1b", "zero_stage": 1, "recompute": "none"}
    assert not layout(row).endswith(" sp")
    assert layout({**row, "sequence_parallel": True}).endswith(" sp")


def test_store_errors_say_what_is_wrong(tmp_path: Path) -> None:
    afile = tmp_path / "f"
    afile.write_text("x")
    with pytest.raises(SpecError) as info:
        ResultStore(afile, "k").save(0, [{"x": 1}])
    assert info.value.message == f"{afile} is not a directory; choose another --out"
    ResultStore(tmp_path / "s", "one").save(0, [{"x": 1}])
    with pytest.raises(SpecError) as info:
        ResultStore(tmp_path / "s", "two").save(0, [{"x": 1}])
    assert "key one, this sweep's is two" in info.value.message


def test_spec_errors_name_their_keys() -> None:
    with pytest.raises(SpecError) as info:
        double_binary_tree(0)
    assert info.value.key == "n"
    with pytest.raises(SpecError) as info:
        load_scenario({"model": {"preset": "gpt3-1.7b", "moe": {"experts": 4, "top_k": 8}},
                       "cluster": {"topology": "dgx-a100-80gb", "nodes": 1},
                       "parallelism": {"global_batch": 8}})
    assert info.value.key.endswith("moe.top_k")


def test_sweep_json_ranks_without_a_results_directory() -> None:
    """Without ``--out`` the rows carry no stored rank: the JSON's ``rank`` is the position in the
    final ranking all the same (1, 2, ... for the distinct shapes in order)."""
    from simcluster.sweep.api import Request, execute
    from simcluster.sweep.report import sweep_dict
    from tests.tiny import tiny_scenario

    outcome = execute(Request(tiny_scenario("ranks"), search=("recompute=none,full",
                                                              "micro_batch=1,2")))
    out = sweep_dict(outcome, 5)
    ranks = [r["rank"] for r in out["top"]]
    assert ranks[0] == 1
    assert ranks == sorted(ranks)
    assert out["best_per_parallel"][0]["rank"] == 1
    assert all("rank" not in outcome.rows[i] for i in outcome.ranked)  # nothing stored


def test_best_per_option_table_shows_days_and_cash() -> None:
    from simcluster.sweep.api import Request, execute
    from simcluster.sweep.report import options_text
    from tests.tiny import tiny_scenario

    doc = {**tiny_scenario("options"), "training": {"tokens": 1e9},
           "cost": {"rent_per_gpu_hour_usd": 2.0}}
    outcome = execute(Request(doc, options=("one: cluster.nodes=1", "two: cluster.nodes=2"),
                              search=("recompute=none",)))
    text = options_text(outcome)
    header = text.splitlines()[0].split()
    assert header[:6] == ["option", "nodes", "gpus", "best", "layout", "step"]
    assert "capital" in header
    assert "cash" in header
    best = outcome.rows[outcome.ranked[0]]
    assert f"{best['time_to_train_days']:.4g}" in text


def test_flow_split_over_paths_by_hand() -> None:
    """A flow split evenly over two paths that share their first edge crosses it once and each
    of the other edges half a time."""
    from simcluster.flows.routes import _usage_of

    a, b, c = ("g0", "s0"), ("s0", "g1"), ("s0", "s1")
    assert dict(_usage_of(((a, b), (a, c)))) == {a: 1.0, b: 0.5, c: 0.5}
    assert dict(_usage_of(((a, b),))) == {a: 1.0, b: 1.0}


def test_dot_subgraphs_are_closed() -> None:
    """Every ``subgraph ... {`` of the DOT text is closed by its own ``  }`` line."""
    from simcluster.topology.graph import build_graph
    from simcluster.topology.render import to_dot

    s = load_scenario("scenarios/default.yaml")
    text = to_dot(build_graph(s.cluster.topology, 2))
    lines = text.splitlines()
    opened = [i for i, line in enumerate(lines) if line.startswith("  subgraph")]
    assert len(opened) == 2
    assert lines.count("  }") == len(opened)
    assert lines[-1] == "}"


@pytest.mark.parametrize(("overlap", "par"), [
    (False, {"zero_stage": 1}), (True, {"zero_stage": 1}), (True, {"zero_stage": 3, "pp": 1}),
    (True, {"zero_stage": 0})])
def test_every_des_record_is_booked_under_a_ledger_category(overlap: bool,
                                                            par: dict[str, Any]) -> None:
    """The DES's records name one of the ledger's categories (the ZeRO-1 weight all-gather after
    the optimizer step as ``dp_comm``, overlapped or not): a record outside them would be lost
    from the breakdown."""
    from simcluster.observe.ledger import CATEGORIES
    from simcluster.sim import simulate_step
    from tests.golden.sim_cases import tiny

    scenario = tiny(execution={"overlap_param_gather": overlap}, **par)
    records = simulate_step(scenario).records
    assert {r.category for r in records} <= set(CATEGORIES)
    if par["zero_stage"] == 1:
        gathers = [r for r in records if r.name.startswith("param all-gather")]
        assert gathers
        assert {r.category for r in gathers} == {"dp_comm"}


def test_recursive_halving_doubling_by_op() -> None:
    """``rhd`` (perf.collectives._rhd): all-gather and reduce-scatter are one halving/doubling pass,
    all-reduce two (Rabenseifner), so at 1 GiB on one DGX A100 the all-reduce costs one start-up
    less than twice the all-gather; broadcast is scatter + all-gather, 2(n-1)/n S at the slowest
    link, which inside one NVSwitch node is the all-reduce's bandwidth term."""
    from simcluster.perf.collectives import collective_time, comm_group
    from simcluster.spec import load_topology

    group = comm_group(load_topology("dgx-a100-80gb"), 8, 1)
    size = 2.0**30
    t = {op: collective_time(op, size, group, "rhd").time_s
         for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")}
    assert t["all_gather"] == t["reduce_scatter"]
    assert 1.9 < t["all_reduce"] / t["all_gather"] < 2.0
    assert t["broadcast"] == pytest.approx(t["all_reduce"], rel=1e-6)


def test_the_ledger_may_miss_the_step_by_at_most_its_tolerance() -> None:
    """sim.step._check_conserved: the booked categories may differ from the step's end by up to
    CONSERVATION_RTOL x max(end, 1 s), that much included; one ulp more is a bug (InvariantError).
    With nothing booked the gap is the end itself, so an end of exactly the tolerance passes."""
    from simcluster.errors import InvariantError
    from simcluster.observe.ledger import Ledger
    from simcluster.sim.step import CONSERVATION_RTOL, _check_conserved

    _check_conserved(Ledger(), CONSERVATION_RTOL)
    with pytest.raises(InvariantError, match="a span was booked twice or not at all"):
        _check_conserved(Ledger(), CONSERVATION_RTOL * (1 + 1e-12))


def test_a_failed_event_is_thrown_into_the_delegated_generator_and_defused() -> None:
    """sim.stream.ComputeStream._resume, as SimPy's Process._resume: a delegated generator waiting
    on an event that fails gets the exception thrown in (a copy, caused by the original) and the
    event is defused, so the environment does not re-raise it when it handles the event."""
    import simpy

    from simcluster.sim.stream import ComputeStream

    env = simpy.Environment()
    caught: list[BaseException] = []
    finished: list[bool] = []

    def delegated(ev: simpy.Event) -> Any:
        try:
            yield ev
        except ValueError as err:
            caught.append(err)

    stream = object.__new__(ComputeStream)
    failing = env.event()
    stream._gen, stream._then = delegated(failing), lambda: finished.append(True)
    stream._send(None)  # runs to the yield: now waiting on ``failing``
    failing.fail(ValueError("link down"))
    env.run()
    assert failing._defused is True
    assert finished == [True]
    assert str(caught[0]) == "link down"
    assert isinstance(caught[0].__cause__, ValueError)


@pytest.mark.parametrize("bad", [0, 1.5, True, "4"])
def test_max_virtual_stages_must_be_a_whole_number_of_at_least_one(bad: object) -> None:
    """sweep.config.axes_from: the section's cap on interleaving names its key and the file."""
    from simcluster.sweep.config import axes_from

    with pytest.raises(SpecError) as refused:
        axes_from({"max_virtual_stages": bad}, [], "plan.yaml")
    assert refused.value.key == "sweep.search.max_virtual_stages"
    assert refused.value.source == "plan.yaml"
    assert refused.value.message == f"expected an integer >= 1, got {bad!r}"
    assert axes_from({"max_virtual_stages": 3}, [], "plan.yaml").max_virtual_stages == 3
