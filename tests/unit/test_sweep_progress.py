"""``simcluster.sweep.progress.Progress``: lines, rate and ETA on a fake clock, tty and not."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from simcluster.errors import SpecError
from simcluster.sweep.progress import Progress, clock_text
from simcluster.sweep.runner import run_chunks
from simcluster.sweep.store import ResultStore
from tests.sweep_tasks import FailingTask, SquareTask, chunks_of


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_clock_text_is_h_mm_ss_with_unbounded_hours() -> None:
    assert clock_text(0) == "0:00:00"
    assert clock_text(59.2) == "0:01:00"  # rounded up: an ETA never promises too early
    assert clock_text(3 * 3600 + 25 * 60 + 7) == "3:25:07"
    assert clock_text(100 * 3600) == "100:00:00"
    assert clock_text(float("inf")) == "-:--:--"


def test_not_a_tty_writes_a_line_at_most_every_interval_and_a_final_line() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(1000, out, "analytical", clock=clock)
    clock.now += 2.0
    progress.advance(100)  # 2 s in: too soon for a line
    assert out.getvalue() == ""
    clock.now += 3.0
    progress.advance(150)  # 5 s in: 250 points at 50/s, 750 left -> 15 s
    assert out.getvalue() == "analytical: 250/1,000 points (25.0%) 50.0 points/s ETA 0:00:15\n"
    clock.now += 1.0
    progress.advance(10)  # 1 s after the last line: silent
    assert out.getvalue().count("\n") == 1
    clock.now += 4.0
    progress.advance(740)
    progress.close()
    progress.close()  # once only
    lines = out.getvalue().splitlines()
    assert lines[1:] == ["analytical: 1,000/1,000 points (100.0%) 100.0 points/s ETA 0:00:00",
                         "analytical: 1,000/1,000 points (100.0%) 100.0 points/s, 0:00:10 elapsed"]


def test_resumed_points_count_as_done_but_not_in_the_rate() -> None:
    clock, out = FakeClock(), io.StringIO()
    progress = Progress(1000, out, clock=clock)
    progress.resume(600)
    clock.now += 10.0
    progress.advance(100)  # 100 points in 10 s: 10/s, 300 left -> 30 s (not 700 / 10 s)
    assert out.getvalue() == "700/1,000 points (70.0%) 10.0 points/s ETA 0:00:30\n"


def test_a_tty_rewrites_one_line_in_place_and_ends_it_at_close() -> None:
    clock, out = FakeClock(), TtyStream()
    progress = Progress(10, out, clock=clock)
    clock.now += 1.0
    progress.advance(5)
    clock.now += 0.1
    progress.advance(1)  # 0.1 s later: under the tty interval, no rewrite
    clock.now += 1.0
    progress.advance(4)
    progress.close()
    text = out.getvalue()
    assert "\n" not in text[:-1]
    assert text.endswith("\n")
    frames = text[:-1].split("\r")[1:]
    assert frames[0] == "5/10 points (50.0%) 5.0 points/s ETA 0:00:01"
    assert frames[1].startswith("10/10 points (100.0%) 4.8 points/s ETA 0:00:00")
    assert frames[2].startswith("10/10 points (100.0%) 4.8 points/s, 0:00:03 elapsed")
    assert len(frames[1]) >= len(frames[0])  # a shorter line blanks the longer one before it


def test_no_rate_yet_gives_an_unknown_eta() -> None:
    clock = FakeClock()
    line = Progress(5, io.StringIO(), clock=clock).line(clock.now)
    assert line == "0/5 points (0.0%) - points/s ETA -:--:--"
    assert Progress(0, io.StringIO(), clock=clock).line(clock.now).startswith("0/0 points (100.0%)")


def test_run_chunks_advances_by_points_and_counts_stored_chunks_at_start(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_chunks(SquareTask(), chunks_of(2), store=ResultStore(out, "k"))
    clock, stream = FakeClock(), io.StringIO()
    progress = Progress(12, stream, clock=clock, interval_s=0.0)
    clock.now += 1.0
    run_chunks(SquareTask(), chunks_of(4), store=ResultStore(out, "k"), progress=progress)
    assert stream.getvalue().splitlines() == [
        "9/12 points (75.0%) 3.0 points/s ETA 0:00:01",
        "12/12 points (100.0%) 6.0 points/s ETA 0:00:00",
        "12/12 points (100.0%) 6.0 points/s, 0:00:01 elapsed"]


def test_the_line_is_closed_when_a_chunk_fails_so_the_error_starts_its_own_line() -> None:
    clock, out = FakeClock(), TtyStream()
    progress = Progress(9, out, clock=clock, tty_interval_s=0.0)
    clock.now += 1.0
    with pytest.raises(SpecError):
        run_chunks(FailingTask(bad=2), chunks_of(3), progress=progress)
    assert out.getvalue().endswith("6/9 points (66.7%) 6.0 points/s, 0:00:01 elapsed\n")
