"""``simcluster.sweep.runner.run_chunks``: order, jobs, errors, interrupts, resume after SIGKILL.

The toy tasks live in tests/sweep_tasks.py so spawned worker processes can import them.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from simcluster.errors import InvariantError, SpecError
from simcluster.sweep import runner
from simcluster.sweep.rows import Row
from simcluster.sweep.runner import Chunk, run_chunks
from simcluster.sweep.store import ResultStore
from tests.sweep_tasks import FailingTask, LastFirstTask, SquareTask, chunks_of, square_row

ROOT = Path(__file__).resolve().parents[2]
POLL_TIMEOUT_S = 60.0


def _expected(chunks: list[Chunk]) -> list[Row]:
    return [square_row(p) for chunk in chunks for p in chunk.points]


def _typed(rows: list[Row]) -> list[list[tuple[str, type, Any]]]:
    """Rows compared with their value types (``2 == 2.0`` would hide an int/float slip)."""
    return [[(k, type(v), v) for k, v in row.items()] for row in rows]


class RecordingStore(ResultStore):
    """A store that remembers the order chunks were saved in (their completion order)."""

    def __init__(self, directory: Path, key: str) -> None:
        super().__init__(directory, key)
        self.saved: list[int] = []

    def save(self, index: int, rows: list[Row]) -> None:
        self.saved.append(index)
        super().save(index, rows)


def _poll(condition: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until ``condition()``: polling, bounded, failing early if ``proc`` died."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the sweep subprocess ended early with status {proc.returncode}")
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the sweep")
        time.sleep(0.02)


def _calls(calls_dir: Path) -> list[int]:
    """Chunk indexes of the task calls recorded in ``calls_dir``, sorted."""
    return sorted(int(p.name.split("-")[1]) for p in calls_dir.glob("chunk-*"))


# --- order, jobs, normalisation -------------------------------------------------------------


def test_jobs_1_and_2_return_the_task_rows_in_chunk_order() -> None:
    chunks = chunks_of(9)
    one = run_chunks(SquareTask(), chunks)
    two = run_chunks(SquareTask(), chunks, jobs=2)
    assert _typed(one) == _typed(two)
    assert [row["point"] for row in one] == list(range(27))
    assert one == _expected(chunks)


def test_rows_come_in_chunk_order_whatever_order_chunks_finish_in(tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    chunks = chunks_of(6)
    store = RecordingStore(tmp_path / "out", "k")
    rows = run_chunks(LastFirstTask(str(flags), len(chunks)), chunks, jobs=2, store=store)
    # chunk 0 finishes only after chunks 1-5 have left their flags, so it is never stored first
    # (not necessarily last: a chunk's flag is left just before it returns, and under load the
    # last one's result can reach the store after chunk 0's)...
    assert store.saved[0] != 0
    assert rows == _expected(chunks)  # ...yet its rows come first
    assert sorted(store.saved) == list(range(6))


def test_chunk_order_is_the_sequence_order_not_the_index_order() -> None:
    chunks = chunks_of(4)[::-1]
    rows = run_chunks(SquareTask(), chunks)
    assert [row["point"] for row in rows] == [9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2]


def test_each_chunk_has_every_key_of_the_chunk_and_floats_where_ints_and_floats_mix() -> None:
    rows = run_chunks(SquareTask(extra_column_from=1), chunks_of(2))
    assert "late" not in rows[0]  # chunk 0 has no such column
    assert all(row["late"] == "c1" for row in rows[3:])
    assert all(type(row["mixed"]) is float for row in rows)  # int in odd points, float in even


def test_a_task_mixing_bool_and_int_in_a_column_is_an_invariant_error() -> None:
    def task(chunk: Chunk) -> list[Row]:
        return [{"x": True}, {"x": 1}]

    with pytest.raises(InvariantError, match="column 'x' holds bool, int"):
        run_chunks(task, chunks_of(1))


def test_repeated_chunk_indexes_are_refused() -> None:
    with pytest.raises(InvariantError, match="repeat"):
        run_chunks(SquareTask(), [Chunk(0, (1,)), Chunk(0, (2,))])


# --- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [0, -1, 257, True, 2.0])
def test_jobs_out_of_range_is_a_spec_error(jobs: Any) -> None:
    with pytest.raises(SpecError, match="from 1 to 256") as err:
        run_chunks(SquareTask(), chunks_of(2), jobs=jobs)
    assert err.value.key == "-j"


def test_unknown_backend_and_stray_address_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="local, ray") as err:
        run_chunks(SquareTask(), chunks_of(2), backend="dask")
    assert err.value.key == "--backend"
    with pytest.raises(SpecError, match="needs --backend ray") as err:
        run_chunks(SquareTask(), chunks_of(2), ray_address="ray://head:10001")
    assert err.value.key == "--ray-address"


def test_ray_missing_is_a_spec_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(SpecError, match=r"pip install 'simcluster\[distributed\]'") as err:
        run_chunks(SquareTask(), chunks_of(2), backend="ray")
    assert err.value.key == "--backend"


# --- errors and interrupts ------------------------------------------------------------------


def test_spec_error_pickles_with_its_key_and_file() -> None:
    err = pickle.loads(pickle.dumps(SpecError("parallelism.tp", "bad", "s.yaml")))
    assert (type(err), err.key, err.message, err.source) == (SpecError, "parallelism.tp", "bad", "s.yaml")


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_worker_spec_error_reaches_the_caller_intact(jobs: int) -> None:
    with pytest.raises(SpecError) as err:
        run_chunks(FailingTask(bad=3), chunks_of(6), jobs=jobs)
    assert (err.value.key, err.value.message, err.value.source) == (
        "parallelism.tp", "chunk 3 is bad", "scenario.yaml")


class _InterruptingProgress:
    """Stands for a Ctrl-C arriving in the parent while it gathers results."""

    def resume(self, points: int) -> None: ...

    def advance(self, points: int) -> None:
        raise KeyboardInterrupt

    def close(self) -> None: ...


def test_keyboard_interrupt_cancels_the_rest_and_ends_the_running_workers(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    task = SquareTask(calls_dir=str(calls), gate_from=1)  # chunks 1.. block (up to 120 s)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_chunks(task, chunks_of(40), jobs=2, progress=_InterruptingProgress())  # type: ignore[arg-type]
        # the workers running blocked chunks are ended, not waited for
        _poll(lambda: not multiprocessing.active_children())
        assert len(_calls(calls)) <= 2 * 2  # only chunks in flight ever started
    finally:
        (calls / "open").touch()


class _ImmediateExecutor:
    """A ProcessPoolExecutor stand-in running each call at submit; records chunks in flight."""

    submitted = 0

    def __init__(self, max_workers: int, mp_context: Any, **kwargs: Any) -> None: ...

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args))
        _ImmediateExecutor.submitted += 1
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None: ...


def test_at_most_two_chunks_per_job_are_submitted_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "ProcessPoolExecutor", _ImmediateExecutor)
    gathered: list[int] = []
    most: list[int] = []

    class Counting:
        def resume(self, points: int) -> None: ...

        def advance(self, points: int) -> None:
            gathered.append(points)
            most.append(_ImmediateExecutor.submitted - len(gathered) + 1)

        def close(self) -> None: ...

    _ImmediateExecutor.submitted = 0
    rows = run_chunks(SquareTask(), chunks_of(20), jobs=3, progress=Counting())  # type: ignore[arg-type]
    assert rows == _expected(chunks_of(20))
    assert max(most) == 2 * 3


# --- store and resume -----------------------------------------------------------------------


def test_stored_chunks_are_loaded_not_recomputed(tmp_path: Path) -> None:
    out, calls = tmp_path / "out", tmp_path / "calls"
    calls.mkdir()
    chunks = chunks_of(5)
    first = run_chunks(SquareTask(), chunks[:3], store=ResultStore(out, "k"))
    again = run_chunks(SquareTask(calls_dir=str(calls)), chunks, store=ResultStore(out, "k"))
    assert _calls(calls) == [3, 4]
    assert _typed(again[:9]) == _typed(first)
    assert _typed(again) == _typed(run_chunks(SquareTask(), chunks))


def _start_sweep(out: Path, calls: Path, jobs: int, gate: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.sweep_tasks", str(out), "k", "10", str(jobs), str(gate),
            str(calls)]
    return subprocess.Popen(argv, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sweep_killed_with_sigkill_resumes_to_the_same_tables(tmp_path: Path, jobs: int) -> None:
    out, calls, again = tmp_path / "out", tmp_path / "calls", tmp_path / "again"
    calls.mkdir()
    again.mkdir()
    proc = _start_sweep(out, calls, jobs, gate=4)  # chunks 4.. wait for a file never made
    parts = out / "parts"
    _poll(lambda: parts.is_dir() and len(list(parts.glob("chunk-*.parquet"))) == 4, proc)
    _poll(lambda: 4 in _calls(calls), proc)  # chunk 4 is in flight when the sweep dies
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers
    proc.wait()
    stored = ResultStore(out, "k").done()
    assert stored == {0, 1, 2, 3}

    store = ResultStore(out, "k")
    resumed = run_chunks(SquareTask(calls_dir=str(again)), chunks_of(10), store=store)
    store.finish(resumed, "csv")
    assert _calls(again) == [4, 5, 6, 7, 8, 9]  # total - stored chunks recomputed

    whole = ResultStore(tmp_path / "whole", "k")
    uninterrupted = run_chunks(SquareTask(), chunks_of(10), jobs=jobs, store=whole)
    whole.finish(uninterrupted, "csv")
    assert _typed(resumed) == _typed(uninterrupted)
    assert (out / "results.csv").read_bytes() == (tmp_path / "whole" / "results.csv").read_bytes()
    assert pq.read_table(out / "results.parquet").equals(pq.read_table(whole.directory / "results.parquet"))


def test_a_fully_stored_sweep_starts_no_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = chunks_of(3)
    run_chunks(SquareTask(), chunks, store=ResultStore(tmp_path, "k"))
    monkeypatch.setitem(sys.modules, "ray", None)  # starting Ray would now fail
    rows = run_chunks(SquareTask(), chunks, backend="ray", store=ResultStore(tmp_path, "k"))
    assert rows == _expected(chunks)
