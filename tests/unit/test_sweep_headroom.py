"""The sweep's memory headroom (issue 24 item 6): ``auto`` by default, a flat GiB on request.

``auto`` keeps a layout only if it fits with PyTorch's caching allocator at the worst
fragmentation GMLake measured over eight LLM training runs (33%, Guo et al. ASPLOS'24,
arXiv 2401.08156) instead of the memory model's average (15%, the same paper): the reserve
``f / (1 - f)`` grows on the bytes allocated and freed every micro-batch only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.cli import main
from simcluster.perf.memory import estimate_memory
from simcluster.perf.memory_overheads import WORST_ALLOCATOR_FRAGMENTATION
from simcluster.spec.loader import load_scenario
from simcluster.spec.scenario import Scenario
from simcluster.sweep.config import Constraints, constraints_from
from simcluster.sweep.evaluate import memory_refusal
from simcluster.units import GiB


def scenario(fragmentation: float = 0.15, micro_batch: int = 4, memory_gib: float = 80) -> Scenario:
    """GPT-3 1.7B on 2 DGX A100 80GB nodes (their memory set to ``memory_gib``)."""
    topology = {"preset": "dgx-a100-80gb", "accelerator": {"memory_GiB": memory_gib}}
    return load_scenario({"model": "gpt3-1.7b", "precision": "bf16",
                          "execution": {"allocator_fragmentation": fragmentation},
                          "cluster": {"topology": topology, "nodes": 2},
                          "parallelism": {"global_batch": 1024, "micro_batch": micro_batch}})


def test_worst_fragmentation_is_gmlakes_maximum() -> None:
    assert WORST_ALLOCATOR_FRAGMENTATION == 0.33


def test_peak_at_worst_fragmentation_by_hand() -> None:
    memory = estimate_memory(scenario())
    stage = memory.stages[memory.peak_stage]
    # 0.33/0.67 - 0.15/0.85 = 0.49254 - 0.17647 = 0.31607 reserved per dynamic byte more
    expected = stage.total_bytes + stage.dynamic_bytes * 0.31607
    assert memory.peak_at_fragmentation(0.33) == pytest.approx(expected, rel=1e-4)
    assert stage.dynamic_bytes > 0


def test_a_scenario_already_at_the_worst_adds_nothing() -> None:
    memory = estimate_memory(scenario(fragmentation=0.5))
    assert memory.peak_at_fragmentation(0.33) == memory.peak_bytes


@settings(max_examples=25, deadline=None)
@given(low=st.floats(0, 0.8), high=st.floats(0, 0.8), mb=st.sampled_from([1, 2, 8]))
def test_more_fragmentation_never_needs_less(low: float, high: float, mb: int) -> None:
    low, high = sorted((low, high))
    memory = estimate_memory(scenario(micro_batch=mb))
    assert memory.peak_bytes <= memory.peak_at_fragmentation(low)
    assert memory.peak_at_fragmentation(low) <= memory.peak_at_fragmentation(high)


def test_refusal_auto_and_flat() -> None:
    memory = estimate_memory(scenario(micro_batch=8))  # 53.2 GiB, 64.4 GiB at 33%: fits 80
    peak, capacity = memory.peak_bytes, memory.capacity_bytes
    assert memory_refusal(memory, None) == memory_refusal(memory, 0.0) == ""
    too_much = (capacity - peak) / GiB + 1.0
    reason = memory_refusal(memory, too_much)
    assert reason.startswith(f"needs {peak / GiB:.1f} GiB per GPU")
    assert f"after {too_much:g} GiB headroom" in reason


def test_auto_refuses_what_only_fits_at_the_average() -> None:
    """Micro-batch 4 needs 32.6 GiB at 15% fragmentation and 38.2 GiB at 33%: a 36 GiB GPU."""
    memory = estimate_memory(scenario(micro_batch=4, memory_gib=36))
    assert memory.peak_bytes <= memory.capacity_bytes < memory.peak_at_fragmentation(0.33)
    reason = memory_refusal(memory, None)
    assert reason == (f"needs {memory.peak_bytes / GiB:.1f} GiB per GPU, "
                      f"{memory.peak_at_fragmentation(0.33) / GiB:.1f} GiB with the allocator at "
                      "33% fragmentation (headroom auto), 36.0 GiB available")
    assert memory_refusal(memory, 0.0) == ""


def test_constraints_default_to_auto_and_parse() -> None:
    assert Constraints().memory_headroom_gib is None
    assert constraints_from(None, {}, "f.yaml").memory_headroom_gib is None
    assert constraints_from({"memory_headroom_gib": "auto"}, {}, "f.yaml").memory_headroom_gib is None
    assert constraints_from({"memory_headroom_gib": 2}, {}, "f.yaml").memory_headroom_gib == 2.0
    flagged = constraints_from({"memory_headroom_gib": 2}, {"memory_headroom_gib": "auto"}, "f")
    assert flagged.memory_headroom_gib is None


def test_cli_flag_takes_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sweep", "scenarios/default.yaml", "--layouts", "fixed", "--quiet", "--json",
            "--out", str(tmp_path / "o")]
    assert main([*args, "--headroom-gib", "auto"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    default = json.loads(capsys.readouterr().out)
    assert auto["top"] == default["top"]
    assert auto["top"]


def test_cli_flag_refuses_other_words(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["sweep", "scenarios/default.yaml", "--headroom-gib", "some"])
    assert stop.value.code == 2
    assert "argument --headroom-gib: expected GiB >= 0 or auto, got 'some'" in capsys.readouterr().err
