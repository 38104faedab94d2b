"""Pipeline schedules as explicit op orders per stage (not formulas).

Each function returns, for one pipeline stage, the sequence of compute ops it runs in one step:
``SchedOp(kind, chunk, mb)`` with ``kind`` one of ``F`` (forward), ``B`` (full backward: input and
weight gradients), ``Bi`` (input gradient only) and ``W`` (weight gradient only; ZB-H1). The
engine runs them strictly in this order, each waiting for its pipeline dependency, so fill, drain
and bubbles come out of the simulation. Orders follow these references:

- gpipe: all forwards, then all backwards (Huang et al., GPipe).
- 1f1b: ``min(p-i-1, m)`` warm-up forwards, then one forward / one backward, then the cool-down
  backwards (Megatron-LM ``schedules.py``, ``forward_backward_pipelining_without_interleaving``).
- interleaved: warm-up ``2(p-i-1) + (v-1)p`` chunk forwards, then 1F1B over chunks; the k-th
  forward runs chunk ``(k // p) % v`` of micro-batch group ``k // (p v)`` (Megatron-LM
  ``forward_backward_pipelining_with_interleaving``, ``get_model_chunk_id``); backwards visit the
  chunks in reverse. When ``p`` does not divide ``m``, all forwards run before the backwards.
- zb-h1: 1F1B with the backward split into ``Bi`` and ``W``; stage ``i`` keeps up to ``i`` weight
  gradients pending so that they fill the cool-down (Qi et al., "Zero Bubble Pipeline
  Parallelism", ICLR 2024, ZB-H1; bubble ``(p-1)(T_F+T_B-T_W)``).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from simcluster.errors import InvariantError


class SchedOp(NamedTuple):
    """One compute op of a stage: kind (F, B, Bi, W), local chunk index, micro-batch."""

    kind: str
    chunk: int
    mb: int


def gpipe(p: int, m: int, stage: int) -> list[SchedOp]:
    """All ``m`` forwards, then all ``m`` backwards."""
    return [SchedOp("F", 0, j) for j in range(m)] + [SchedOp("B", 0, j) for j in range(m)]


def one_f_one_b(p: int, m: int, stage: int) -> list[SchedOp]:
    """PipeDream-Flush / Megatron 1F1B."""
    warmup = min(p - stage - 1, m)
    ops = [SchedOp("F", 0, j) for j in range(warmup)]
    for k in range(m - warmup):
        ops += [SchedOp("F", 0, warmup + k), SchedOp("B", 0, k)]
    return ops + [SchedOp("B", 0, j) for j in range(m - warmup, m)]


def _interleaved_order(p: int, m: int, v: int) -> list[tuple[int, int]]:
    """(chunk, micro-batch) of the k-th forward: groups of ``p`` micro-batches, chunk by chunk."""
    order = []
    for first in range(0, m, p):
        group = range(first, min(first + p, m))
        order += [(c, j) for c in range(v) for j in group]
    return order


def interleaved(p: int, m: int, stage: int, v: int) -> list[SchedOp]:
    """Megatron interleaved 1F1B with ``v`` model chunks per stage."""
    order = _interleaved_order(p, m, v)
    total = m * v
    warmup = min(2 * (p - stage - 1) + (v - 1) * p, total)
    if m % p:
        # Megatron's warm-up count assumes full groups of p micro-batches; with a partial last
        # group that order can deadlock, so every forward runs first (GPipe-like memory).
        warmup = total
    fwd = [SchedOp("F", c, j) for c, j in order]
    bwd = [SchedOp("B", v - 1 - c, j) for c, j in order]
    ops = fwd[:warmup]
    for k in range(total - warmup):
        ops += [fwd[warmup + k], bwd[k]]
    return ops + bwd[total - warmup:]


def zb_h1(p: int, m: int, stage: int) -> list[SchedOp]:
    """ZB-H1: 1F1B order with ``B`` split into ``Bi`` then a deferred ``W`` (``stage`` pending)."""
    pending: deque[int] = deque()
    ops: list[SchedOp] = []

    def backward(j: int) -> None:
        ops.append(SchedOp("Bi", 0, j))
        pending.append(j)
        if len(pending) > stage:
            ops.append(SchedOp("W", 0, pending.popleft()))

    warmup = min(p - stage - 1, m)
    ops += [SchedOp("F", 0, j) for j in range(warmup)]
    for k in range(m - warmup):
        ops.append(SchedOp("F", 0, warmup + k))
        backward(k)
    for j in range(m - warmup, m):
        backward(j)
    return ops + [SchedOp("W", 0, j) for j in pending]


def stage_order(schedule: str, p: int, m: int, stage: int, v: int = 1) -> list[SchedOp]:
    """The op order of ``stage`` under ``schedule`` (``v`` only for interleaved)."""
    if not 0 <= stage < p or m < 1:
        raise InvariantError(f"need 0 <= stage < p and m >= 1, got {stage}, {p}, {m}")
    if schedule == "gpipe":
        return gpipe(p, m, stage)
    if schedule == "1f1b":
        return one_f_one_b(p, m, stage)
    if schedule == "interleaved":
        return interleaved(p, m, stage, v)
    if schedule == "zb-h1":
        return zb_h1(p, m, stage)
    raise InvariantError(f"{schedule!r} is not one of gpipe, 1f1b, interleaved, zb-h1")
