"""Run a picklable task over chunks of sweep points: in-process, in worker processes, or on Ray.

:func:`run_chunks` is the sweep's generic engine. The caller cuts its points into numbered
:class:`Chunk` s and passes a :class:`ChunkTask` (a picklable callable, e.g. a frozen dataclass
with ``__call__``) that turns one chunk into result rows. Chunks already in the
:class:`~simcluster.sweep.store.ResultStore` are loaded instead of computed; each computed chunk is
stored as soon as it finishes, so a killed sweep loses only the chunks in flight. The rows come
back in chunk order whatever order the chunks finished in, so ``jobs``, the backend and resuming
change no result.

Backends:

* ``jobs=1``: in this process, no pool (easy to debug and profile);
* ``jobs>1``: a ``ProcessPoolExecutor`` of ``jobs`` workers started by ``spawn`` (nothing is
  inherited: the task and chunks are pickled), at most ``2*jobs`` chunks submitted at a time;
* ``backend="ray"``: Ray tasks on an existing cluster (``ray_address``) or a local Ray of ``jobs``
  CPUs, at most ``2*jobs`` in flight (:mod:`simcluster.sweep.ray_backend`).

A task's exception reaches the caller as itself (a :class:`~simcluster.errors.SpecError` keeps
its key and file); KeyboardInterrupt cancels pending chunks, stops the workers and is re-raised.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import closing, suppress
from dataclasses import dataclass
from typing import Any, Protocol

from simcluster.errors import InvariantError, SpecError
from simcluster.sweep.progress import Progress
from simcluster.sweep.rows import Row, normalize_rows
from simcluster.sweep.store import ResultStore

__all__ = ["BACKENDS", "MAX_JOBS", "Chunk", "ChunkTask", "Row", "run_chunk", "run_chunks"]

MAX_JOBS = 256
#: ``prctl`` option: the signal a process gets when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
BACKENDS = ("local", "ray")
IN_FLIGHT_PER_JOB = 2  # chunks submitted per worker: one running, one queued (bounded memory)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Points evaluated together by one task call.

    Attributes
    ----------
    index : int
        Position of the chunk in the sweep (0, 1, 2, ...): the order of the rows, and the name of
        its stored part.
    points : tuple[Any, ...]
        Picklable points (small frozen dataclasses or tuples).
    """

    index: int
    points: tuple[Any, ...]


class ChunkTask(Protocol):
    """A picklable callable turning a chunk into flat result rows (a frozen dataclass with
    ``__call__``, defined at module level so worker processes can import it)."""

    def __call__(self, chunk: Chunk) -> list[Row]: ...


ChunkResults = Generator[tuple[Chunk, list[Row]], None, None]


def run_chunk(task: ChunkTask, chunk: Chunk) -> list[Row]:
    """``task(chunk)``, normalised (:func:`~simcluster.sweep.rows.normalize_rows`): what every
    backend runs, in whichever process."""
    return normalize_rows(task(chunk))


def run_chunks(task: ChunkTask, chunks: Sequence[Chunk], *, jobs: int = 1, backend: str = "local",
               ray_address: str | None = None, store: ResultStore | None = None,
               progress: Progress | None = None) -> list[Row]:
    """Every chunk's rows, concatenated in chunk order (whatever order the chunks finished in).

    Parameters
    ----------
    task : ChunkTask
        Turns a chunk into rows; picklable when ``jobs > 1`` or ``backend="ray"``.
    chunks : Sequence[Chunk]
        The sweep's chunks, with distinct indexes.
    jobs : int
        Worker processes (local) or Ray tasks in flight / local Ray CPUs, 1 to 256.
    backend : str
        ``"local"`` or ``"ray"``.
    ray_address : str | None
        An existing Ray cluster (``backend="ray"`` only); None starts a local Ray.
    store : ResultStore | None
        Where chunks are stored as they finish and loaded from when already there.
    progress : Progress | None
        Advanced by each chunk's points (stored chunks count as done at start); closed at the end.

    Raises
    ------
    SpecError
        ``-j``, ``--backend`` or ``--ray-address`` out of range; or whatever the task raised.
    """
    _check_arguments(jobs, backend, ray_address)
    _check_indexes(chunks)
    done = store.done() if store is not None else set()
    results: dict[int, list[Row]] = {}
    for chunk in chunks:
        if store is not None and chunk.index in done:
            results[chunk.index] = store.load(chunk.index)
            if progress is not None:
                progress.resume(len(chunk.points))
    pending = [chunk for chunk in chunks if chunk.index not in results]
    try:
        # closing: an error here ends the workers now, not when its traceback is freed
        with closing(_backend_results(task, pending, jobs, backend, ray_address)) as finished:
            for chunk, rows in finished:
                if store is not None:
                    store.save(chunk.index, rows)
                results[chunk.index] = rows
                if progress is not None:
                    progress.advance(len(chunk.points))
    finally:
        if progress is not None:
            progress.close()  # also on error: the message that follows starts on its own line
    return [row for chunk in chunks for row in results[chunk.index]]


def _backend_results(task: ChunkTask, pending: list[Chunk], jobs: int, backend: str,
                     ray_address: str | None) -> ChunkResults:
    if not pending:  # everything stored: start no pool and no Ray
        return _no_results()
    if backend == "ray":
        from simcluster.sweep.ray_backend import ray_results

        return ray_results(task, pending, jobs, ray_address)
    if jobs == 1 or len(pending) <= 1:
        return ((chunk, run_chunk(task, chunk)) for chunk in pending)
    return pool_results(task, pending, jobs)


def die_with_parent(parent: int) -> None:
    """Worker initializer: the kernel kills this worker when the sweep process dies, however it
    dies (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so a SIGKILLed sweep leaves no worker
    blocked on its queue; a worker whose parent is already gone exits at once. Elsewhere only the
    second check applies."""
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _no_results() -> ChunkResults:
    yield from ()


def pool_results(task: ChunkTask, chunks: Sequence[Chunk], jobs: int) -> ChunkResults:
    """``(chunk, rows)`` as chunks finish in ``jobs`` spawned worker processes."""
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), mp_context=context,
                               initializer=die_with_parent, initargs=(os.getpid(),))
    flying: dict[Future[list[Row]], Chunk] = {}
    queue = iter(chunks)
    try:
        _refill(pool, task, queue, flying, IN_FLIGHT_PER_JOB * jobs)
        while flying:
            finished, _ = wait(flying, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: flying[f].index):
                chunk = flying.pop(future)
                yield chunk, future.result()  # re-raises the task's exception as itself
            _refill(pool, task, queue, flying, IN_FLIGHT_PER_JOB * jobs)
    except BaseException:  # a task's error, KeyboardInterrupt, or the caller closing early
        _stop(pool, flying)
        raise
    pool.shutdown(wait=True)


def _stop(pool: ProcessPoolExecutor, flying: dict[Future[list[Row]], Chunk]) -> None:
    """Cancel the chunks not started and end the workers now, without waiting for the running
    chunks (whose results nobody will gather): Ctrl-C stops a sweep at once."""
    for future in flying:
        future.cancel()
    # ProcessPoolExecutor has no public way to end its workers before Python 3.14
    # (terminate_workers); without it, exiting would wait for every running chunk to finish.
    processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()
    # A worker terminated while it wrote a chunk's rows leaves half a message in the result pipe;
    # the pool's manager thread, reading it, would wait for the rest for ever, and the interpreter
    # joins that thread before it exits (a SIGINTed `sweep -j 2` hung so). The parent holds a
    # write end of that pipe too: closed, the read ends in EOF once the workers are gone, the
    # thread marks the pool broken and returns.
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None:
        writer.close()
    pool.shutdown(wait=False, cancel_futures=True)


def _refill(pool: ProcessPoolExecutor, task: ChunkTask, queue: Iterator[Chunk],
            flying: dict[Future[list[Row]], Chunk], limit: int) -> None:
    """Submit chunks from ``queue`` until ``limit`` are in flight or none is left."""
    while len(flying) < limit:
        chunk = next(queue, None)
        if chunk is None:
            return
        flying[pool.submit(run_chunk, task, chunk)] = chunk


def _check_arguments(jobs: int, backend: str, ray_address: str | None) -> None:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise SpecError("-j", f"must be a whole number of jobs from 1 to {MAX_JOBS}, got {jobs!r}")
    if backend not in BACKENDS:
        raise SpecError("--backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if ray_address is not None and backend != "ray":
        raise SpecError("--ray-address", "needs --backend ray")


def _check_indexes(chunks: Sequence[Chunk]) -> None:
    indexes = [chunk.index for chunk in chunks]
    if len(set(indexes)) != len(indexes):
        raise InvariantError("run_chunks: chunk indexes repeat")
