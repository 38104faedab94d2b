"""The DES step on scenarios: agreement with the analytical model, overlap, symmetry breaking,
perturbations, critical path and traces."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from simcluster.errors import SpecError
from simcluster.observe import ChromeTracer
from simcluster.perf.step import estimate_step
from simcluster.sim import GpuSlowdown, LinkDegradation, Perturbations, simulate_step, write_trace
from simcluster.sim.perturb import perturbations_of
from simcluster.spec import dump_scenario, load_scenario
from tests.golden.sim_cases import tiny

ROOT = Path(__file__).resolve().parents[2]


def _compute_lower_bound(result: object) -> float:
    """Busiest compute stream: the sum of its ops (no schedule can beat it)."""
    plan = result.plan  # type: ignore[attr-defined]
    return max(sum(op.duration_s for op in st.ops) + st.optimizer_s for st in plan.stages)


@pytest.mark.parametrize("kwargs", [{"pp": 1}, {"pp": 1, "tp": 1}, {"pp": 1, "tp": 4, "nodes": 1},
                                    {"pp": 1, "schedule": "gpipe"},
                                    {"pp": 1, "execution": {"grad_accumulation_fusion": False}}])
def test_equals_the_analytical_step_without_pipeline(kwargs: dict[str, Any]) -> None:
    # pp = 1, one DP bucket, reduction after backward: both engines model exactly the same thing.
    s = tiny(**kwargs)
    des, ana = simulate_step(s), estimate_step(s)
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=1e-12)
    for key, value in ana.breakdown.as_dict().items():
        assert des.breakdown.as_dict()[key] == pytest.approx(value, rel=1e-9, abs=1e-15), key


@pytest.mark.parametrize("name", ["default.yaml", "gpt3-175b-1024xa100.yaml"])
def test_close_to_the_analytical_step_with_pipeline(name: str) -> None:
    s = load_scenario(ROOT / "scenarios" / name)
    des, ana = simulate_step(s), estimate_step(s)
    assert des.iteration_time_s == pytest.approx(ana.iteration_time_s, rel=0.05)
    assert des.iteration_time_s >= _compute_lower_bound(des)
    # the ledger's categories account for the wall time of the event log (not for the sum that
    # defines the step): the last op ends when the step does
    assert des.extrapolation is None
    assert des.breakdown.total_s == pytest.approx(max(r.end_s for r in des.records), rel=1e-12)
    assert des.model_flops == ana.model_flops
    assert des.hardware_flops == ana.hardware_flops


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1"])
def test_never_below_the_compute_lower_bound(schedule: str) -> None:
    result = simulate_step(tiny(pp=2, schedule=schedule))
    assert result.iteration_time_s >= _compute_lower_bound(result)


def _wide(overlap: bool) -> object:
    # A wider model: several 40M-parameter DP buckets per stage.
    from simcluster.spec import load_scenario as load
    model = {"name": "w", "layers": 8, "hidden": 4096, "heads": 32, "vocab": 32000,
             "seq_len": 1024}
    return load({"name": "w", "model": model, "cluster": {"topology": "dgx-a100-80gb",
                                                          "nodes": 4},
                 "execution": {"overlap_grad_reduce": overlap, "overlap_param_gather": overlap},
                 "parallelism": {"tp": 8, "pp": 1, "global_batch": 8, "zero_stage": 1}})


def test_overlap_hides_dp_reduction_under_the_last_backward() -> None:
    off, on = simulate_step(_wide(False)), simulate_step(_wide(True))  # type: ignore[arg-type]
    assert off.dp_hidden_s == 0.0
    assert off.dp_total_s > 0
    assert on.dp_hidden_s > 0
    assert on.breakdown.dp_comm < off.breakdown.dp_comm
    assert on.iteration_time_s < off.iteration_time_s
    assert len(on.plan.dp_buckets[0]) > 1


def test_symmetry_one_class_for_a_uniform_cluster() -> None:
    result = simulate_step(load_scenario(ROOT / "scenarios" / "gpt3-175b-1024xa100.yaml"))
    assert [(g.name, g.multiplicity) for g in result.plan.groups] == [("nominal", 8)]
    assert result.simulated_gpus == 16


def test_a_slow_gpu_gets_its_own_replica_class_and_stretches_the_step() -> None:
    s = tiny(pp=2)
    base = simulate_step(s)
    # GPU 3 of node 0 is global rank 3: stage 0 of DP replica 1 (tp 2, dp 2).
    slow = simulate_step(s, perturbations=Perturbations(gpu_slowdown=(GpuSlowdown(0, 3, 0.5),)))
    assert [(g.name, g.multiplicity) for g in slow.plan.groups] == [("nominal", 1), ("dp1", 1)]
    assert slow.iteration_time_s > base.iteration_time_s
    assert slow.critical_group == "dp1"
    assert slow.breakdown.compute > base.breakdown.compute


def test_degraded_links_everywhere_slow_communication_only() -> None:
    s = tiny(pp=2)
    base = simulate_step(s)
    half = simulate_step(s, perturbations=Perturbations(
        link_bandwidth=(LinkDegradation("scale_out", None, 0.5),)))
    assert half.iteration_time_s > base.iteration_time_s
    assert half.breakdown.compute == pytest.approx(base.breakdown.compute)
    assert half.plan.groups == base.plan.groups  # no symmetry broken


def test_a_degraded_node_slows_its_replica_and_the_dp_ring() -> None:
    s = tiny(pp=1)  # tp 2, dp 4 over two nodes: replicas 0 and 1 sit on node 0
    base = simulate_step(s)
    one = simulate_step(s, perturbations=Perturbations(
        link_bandwidth=(LinkDegradation("scale_out", 0, 0.25),)))
    assert [(g.name, g.multiplicity) for g in one.plan.groups] == [
        ("nominal", 2), ("dp0", 1), ("dp1", 1)]
    assert one.iteration_time_s > base.iteration_time_s
    assert sum(one.plan.dp_buckets[0]) > sum(base.plan.dp_buckets[0])


def test_perturbations_are_checked() -> None:
    with pytest.raises(SpecError, match="gpu_slowdown"):
        simulate_step(tiny(), perturbations=Perturbations(gpu_slowdown=(GpuSlowdown(9, 0, 0.5),)))
    with pytest.raises(SpecError, match="layer"):
        simulate_step(tiny(), perturbations=Perturbations(
            link_bandwidth=(LinkDegradation("nvlink", None, 0.5),)))


def test_perturbations_adapter_defaults_to_none_and_reads_the_spec() -> None:
    assert perturbations_of(tiny()) == Perturbations()
    s = load_scenario(dump_scenario(tiny()), [
        "perturbations={gpu_slowdown: [{node: 1, gpu: 2, factor: 0.5}], "
        "link_bandwidth: [{layer: scale_out, factor: 0.5}]}"])
    got = perturbations_of(s)
    assert got.gpu_slowdown == (GpuSlowdown(1, 2, 0.5),)
    assert got.link_bandwidth == (LinkDegradation("scale_out", None, 0.5),)


def test_critical_path_starts_at_zero_and_ends_the_step() -> None:
    result = simulate_step(tiny(pp=2))
    path = result.critical_path
    assert path[0].start_s == 0.0
    assert path[0].gate == -1
    assert path[-1].end_s == pytest.approx(result.iteration_time_s, rel=1e-12)
    assert all(a.eid == b.gate for a, b in itertools.pairwise(path))


def test_trace_has_stages_streams_spans_and_bubbles(tmp_path: Path) -> None:
    result = simulate_step(tiny(pp=2, execution={"overlap_grad_reduce": True}))
    path = write_trace(result, tmp_path / "t.json")
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"stage 0 [nominal x2]", "stage 1 [nominal x2]"}
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["tid"] for e in spans} == {0, 1, 2}
    assert any(e["name"] == "bubble" for e in spans)
    assert any(e["name"].startswith("F c0") for e in spans)
    assert any(e["name"].startswith("bucket") for e in spans)
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(result.iteration_time_s * 1e6)


def test_tracer_is_injected() -> None:
    tracer = ChromeTracer()
    simulate_step(tiny(), tracer=tracer)
    assert any(e["ph"] == "X" for e in tracer.events)
    assert json.loads(tracer.to_json())["displayTimeUnit"] == "ms"
