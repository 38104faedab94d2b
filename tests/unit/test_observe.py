"""Ledger, records and tracers (observe/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcluster.errors import InvariantError
from simcluster.observe import CATEGORIES, ChromeTracer, Ledger, NullTracer, OpRecord
from simcluster.observe.tracer import write_text_atomic
from simcluster.perf.step import TimeBreakdown
from simcluster.sim import simulate_step
from simcluster.sim.step import _check_conserved
from tests.golden.sim_cases import tiny


def test_ledger_categories_are_the_breakdown_fields() -> None:
    assert tuple(TimeBreakdown().as_dict()) == CATEGORIES


def test_ledger_adds_and_checks() -> None:
    ledger = Ledger()
    ledger.add("compute", 1.5)
    ledger.add("bubble", 0.5)
    assert ledger.total_s == 2.0
    assert ledger.gap_s(2.0) == 0.0
    assert ledger.as_dict()["compute"] == 1.5
    with pytest.raises(InvariantError):
        ledger.add("naps", 1.0)
    with pytest.raises(InvariantError):
        ledger.add("compute", -1.0)


def test_records_are_flat_and_immutable() -> None:
    rec = OpRecord(eid=0, group="nominal", stage=1, stream="compute", name="F c0 mb0",
                   category="compute", start_s=1.0, end_s=3.0)
    assert rec.duration_s == 2.0
    assert rec.as_dict()["stage"] == 1
    with pytest.raises(AttributeError):
        rec.stage = 2  # type: ignore[misc]


def test_chrome_tracer_writes_perfetto_json(tmp_path: Path) -> None:
    tracer = ChromeTracer()
    tracer.name_process(3, "stage 3", 3)
    tracer.name_thread(3, 0, "compute")
    tracer.span(3, 0, "F c0 mb0", 1e-3, 2e-3, "compute", {"eid": 1})
    tracer.instant(3, 0, "fail", 2e-3)
    data = json.loads(tracer.write(tmp_path / "sub" / "t.json").read_text())
    span = next(e for e in data["traceEvents"] if e["ph"] == "X")
    assert span["ts"] == pytest.approx(1000.0)
    assert span["dur"] == pytest.approx(1000.0)
    assert {e["ph"] for e in data["traceEvents"]} == {"M", "X", "i"}


def test_null_tracer_accepts_everything_and_changes_nothing() -> None:
    """Observation is injected (by the caller): the NullTracer keeps no state, and a step
    traced by it, by a ChromeTracer or by none has the same event log and times."""
    tracer = NullTracer()
    calls = (tracer.name_process(0, "x", 0), tracer.name_thread(0, 0, "x"),
             tracer.span(0, 0, "x", 0.0, 1.0, "compute"), tracer.instant(0, 0, "x", 0.0))
    assert calls == (None, None, None, None)
    assert vars(tracer) == {}
    s = tiny(pp=2)
    plain, null, chrome = (simulate_step(s, tracer=t) for t in (None, NullTracer(), ChromeTracer()))
    assert plain.event_log() == null.event_log() == chrome.event_log()
    assert plain.iteration_time_s == null.iteration_time_s == chrome.iteration_time_s


def test_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = write_text_atomic(tmp_path / "out.json", "{}")
    assert target.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_the_des_refuses_a_ledger_that_does_not_add_up_to_the_step() -> None:
    """sim.step checks conservation (Ledger.gap_s) instead of defining the step as the sum."""
    ledger = Ledger()
    ledger.add("compute", 3.0)
    ledger.add("bubble", 1.0)
    _check_conserved(ledger, 4.0 + 1e-12)  # float noise passes
    with pytest.raises(InvariantError, match="gap"):
        _check_conserved(ledger, 4.5)  # half a second went unbooked
    ledger.add("pp_comm", 1.0)
    with pytest.raises(InvariantError, match="gap"):
        _check_conserved(ledger, 4.5)  # booked twice
