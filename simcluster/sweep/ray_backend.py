"""The Ray backend of :func:`simcluster.sweep.runner.run_chunks`.

Chunks become Ray tasks (``ray.remote`` of :func:`~simcluster.sweep.runner.run_chunk`), at most
``2*jobs`` in flight, gathered with ``ray.wait`` as they finish. With an address, Ray joins that
cluster (``ray.init(address=...)``); without one it starts a quiet local Ray of ``jobs`` CPUs.
Ray is shut down afterwards only if this module started it (a Ray the caller had already
initialised is left running). ``ray`` is imported here only, so the local backends never need it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from simcluster.errors import SpecError
from simcluster.sweep.runner import IN_FLIGHT_PER_JOB, Chunk, ChunkResults, ChunkTask, run_chunk


def import_ray() -> ModuleType:
    """The ``ray`` module, or a SpecError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise SpecError("--backend", "ray is not installed: pip install 'simcluster[distributed]'"
                        ) from exc
    return ray


def ray_results(task: ChunkTask, chunks: Sequence[Chunk], jobs: int, address: str | None
                ) -> ChunkResults:
    """``(chunk, rows)`` as chunks finish on Ray (a generator: Ray starts on the first ``next``)."""
    ray = import_ray()
    started = _start(ray, jobs, address)
    flying: dict[Any, Chunk] = {}
    try:
        remote = ray.remote(num_cpus=1)(run_chunk)
        task_ref = ray.put(task)  # shipped once, not once per chunk
        queue = iter(chunks)
        _refill(remote, task_ref, queue, flying, IN_FLIGHT_PER_JOB * jobs)
        while flying:
            ready, _ = ray.wait(list(flying), num_returns=1)
            for ref in ready:
                chunk = flying.pop(ref)
                yield chunk, _get(ray, ref)
            _refill(remote, task_ref, queue, flying, IN_FLIGHT_PER_JOB * jobs)
    finally:
        for ref in flying:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def _start(ray: ModuleType, jobs: int, address: str | None) -> bool:
    """Connect to Ray; whether this call started it (and so must shut it down)."""
    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address is not None:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=jobs, include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise SpecError("--ray-address" if address else "--backend",
                        f"cannot start {where}: {exc}") from exc
    return True


def _refill(remote: Any, task_ref: Any, queue: Any, flying: dict[Any, Chunk], limit: int) -> None:
    """Submit chunks from ``queue`` until ``limit`` are in flight or none is left."""
    while len(flying) < limit:
        chunk = next(queue, None)
        if chunk is None:
            return
        flying[remote.remote(task_ref, chunk)] = chunk


def _get(ray: ModuleType, ref: Any) -> Any:
    """The chunk's rows; a task's exception re-raised as itself, not as Ray's wrapper."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, Exception):
            raise cause from exc
        raise
