"""Toy sweep tasks for the runner tests, importable by worker processes and Ray workers.

``python -m tests.sweep_tasks OUT KEY CHUNKS JOBS [GATE_FROM CALLS_DIR]`` runs a sweep of
``SquareTask`` over ``CHUNKS`` chunks into ``OUT``: the kill-and-resume test's subprocess.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from simcluster.errors import SpecError
from simcluster.sweep.runner import Chunk, Row, run_chunks
from simcluster.sweep.store import ResultStore

POINTS_PER_CHUNK = 3
GATE_TIMEOUT_S = 120.0  # a gated chunk of a killed sweep's orphan worker gives up after this


def square_row(p: int) -> Row:
    """The toy result of point ``p``: every column type, an all-None column, int/float mixing."""
    return {"point": p, "square": p * p, "name": f"p{p}", "odd": p % 2 == 1,
            "maybe": None if p % 3 else p / 3, "never": None, "mixed": p if p % 2 else p + 0.5}


def chunks_of(n_chunks: int, per_chunk: int = POINTS_PER_CHUNK) -> list[Chunk]:
    """``n_chunks`` chunks of consecutive integer points."""
    return [Chunk(i, tuple(range(i * per_chunk, (i + 1) * per_chunk))) for i in range(n_chunks)]


@dataclass(frozen=True, slots=True)
class SquareTask:
    """Rows of :func:`square_row`; optionally records each call and holds chunks back.

    ``calls_dir``: each call leaves a file there (the test counts computed chunks). ``gate_from``:
    chunks of that index and after wait until ``calls_dir/open`` exists (a killed sweep is thus
    caught with exactly the chunks before it stored).
    """

    calls_dir: str | None = None
    gate_from: int | None = None
    extra_column_from: int | None = None  # chunks from this index add a column (order test)

    def __call__(self, chunk: Chunk) -> list[Row]:
        if self.calls_dir is not None:
            name = f"chunk-{chunk.index}-{os.getpid()}-{uuid.uuid4().hex}"
            (Path(self.calls_dir) / name).touch()
            if self.gate_from is not None and chunk.index >= self.gate_from:
                _wait_for(Path(self.calls_dir) / "open")
        rows = [square_row(p) for p in chunk.points]
        if self.extra_column_from is not None and chunk.index >= self.extra_column_from:
            for row in rows:
                row["late"] = f"c{chunk.index}"
        return rows


@dataclass(frozen=True, slots=True)
class LastFirstTask:
    """Chunk 0 finishes last: it waits until every other chunk has left a file in ``flag_dir``."""

    flag_dir: str
    n_chunks: int

    def __call__(self, chunk: Chunk) -> list[Row]:
        flags = Path(self.flag_dir)
        if chunk.index == 0:
            _wait_for(flags, count=self.n_chunks - 1)
        rows = [square_row(p) for p in chunk.points]
        if chunk.index != 0:
            (flags / f"done-{chunk.index}").touch()
        return rows


@dataclass(frozen=True, slots=True)
class FailingTask:
    """Raises a SpecError on chunk ``bad``: the error must reach the caller intact."""

    bad: int

    def __call__(self, chunk: Chunk) -> list[Row]:
        if chunk.index == self.bad:
            raise SpecError("parallelism.tp", f"chunk {chunk.index} is bad", "scenario.yaml")
        return [square_row(p) for p in chunk.points]


@dataclass(frozen=True, slots=True)
class TrivialTask:
    """One tiny row per chunk: the per-chunk overhead of a backend."""

    def __call__(self, chunk: Chunk) -> list[Row]:
        return [{"index": chunk.index}]


def _wait_for(path: Path, count: int | None = None) -> None:
    """Until ``path`` exists (or, with ``count``, holds ``count`` files)."""
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not (path.exists() if count is None else len(list(path.iterdir())) >= count):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


def main(argv: list[str]) -> None:
    """The kill-and-resume subprocess (module docstring)."""
    out, key, n_chunks, jobs = Path(argv[0]), argv[1], int(argv[2]), int(argv[3])
    gate = int(argv[4]) if len(argv) > 4 else None
    task = SquareTask(calls_dir=argv[5] if len(argv) > 5 else None, gate_from=gate)
    rows = run_chunks(task, chunks_of(n_chunks), jobs=jobs, store=ResultStore(out, key))
    ResultStore(out, key).finish(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
