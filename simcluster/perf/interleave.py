"""Interleaved 1F1B with unequal virtual stages: the step's critical path through the op order.

The closed form of :mod:`.pipeline` prices a pipeline as ``m`` micro-batches on the slowest stage
plus ``(p-1)(t_f+t_b)/v`` of fill and drain (Narayanan et al. SC'21 s2.2.2). Both terms assume
that a stage does the same work in every round of the schedule. Interleaved 1F1B runs each group
of ``p`` micro-batches chunk by chunk around the ring of ``p`` stages, which holds a single op of
slack per revolution; with unequal *virtual* stages (an uneven ``parallelism.stage_layers``, or a
slow GPU's stage) a stage's work changes from round to round, and a stage that is light in one
round waits for a neighbour that is heavy in it. The step is then longer than the slowest stage's
work plus the fill and drain: by up to 17% on the Llama 3 405B sweep's best layouts before this
module (docs/des.md, "Agreement with the analytical model").

This module computes the step of the idealised pipeline (the op order of
:func:`simcluster.sim.schedules.interleaved`, every op for its duration, every pipeline send
blocking its sender, no contention: the discrete-event engine without its networks) as its
longest path (the critical path method, Kelley and Walker 1959), on a lattice of ticks:

- **Ticks.** Stage ``i``'s ``n``-th forward runs at tick ``n + i + 1 - V`` and its ``n``-th
  backward at tick ``n + p - 1 - i`` (``V = p v``). With Megatron's warm-up of
  ``2(p-i-1) + (v-1)p`` forwards, the forward of virtual stage ``vs`` waits for the forward of
  ``vs - 1`` (stage ``i-1``, or stage ``p-1`` one chunk earlier) one tick earlier, and the
  backward of ``vs`` for the backward of ``vs + 1`` one tick earlier: every dependency between
  stages goes from one tick to the next, and within a stage the op order is the tick order,
  forward first. Warm-up ticks hold forwards only, cool-down ticks backwards only.
- **Rows.** A stage's ticks are one row: its longest paths ``Q(k) = max(Q(k-1) + w(k), E(k))``
  (``w`` its ops at tick ``k``, ``E`` what its dependencies bring) are ``C + cummax(E - C)``,
  ``C`` the row's prefix sums, one vectorised pass. The rows are swept up the ring through the
  warm-up (the first micro-batch's forward filling the pipeline, round the ring while the wrap
  into stage 0 improves anything), then down the ring, revolution after revolution (the
  backward's dependency chain runs down it), at most one per group of ``p`` micro-batches and one
  for the fill and the drain, while stage 0 still gains anything that could beat the best end
  (bounded by every later tick's heaviest stage).
- **Left out.** Paths that climb a forward chain up the ring outside the warm-up skip a backward
  per stage they climb; they are left out, so the result is a lower bound of the longest path.
  Against a direct simulation of the op order it is exact on 153 of the 170 uneven splits the
  shipped scenarios' sweeps give interleaved layouts, and at most 0.6% below on the others
  (tests/unit/test_interleave.py); on contrived stage times (one stage several times another's)
  it can be a few percent below.
- **Long steps.** Once the pipeline is in its periodic steady state every group of ``p``
  micro-batches adds the same time (the property :mod:`simcluster.sim.periodic` uses): beyond
  ``3p`` micro-batches the step is extrapolated from ``2p`` and ``3p``, the two swept together on
  one row (the second step's values raised above the first's, so a running maximum never mixes
  them).

The cost is a few tens of vectorised passes per stage over ``m v + V + p`` ticks, memoised on the
stage times (layouts that differ only in what the pipeline does not see share it). Only
interleaved layouts with unequal virtual stages take it (:func:`needs_lattice`); with equal ones
the closed form is exact up to the logits and the embedding (a single heavier virtual stage does
not change the steady state, only the fill and drain, which the closed form averages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simcluster.errors import InvariantError
from simcluster.perf.cache import memoised

Array = npt.NDArray[np.float64]

#: Micro-batch groups simulated at most; longer steps are extrapolated from the last two.
DIRECT_GROUPS = 3
_NEG = -np.inf


@dataclass(frozen=True, slots=True, eq=False)
class Lattice:
    """The op order of interleaved 1F1B on ticks, for one or more micro-batch counts laid end to
    end on one row per stage (read-only arrays, cached per ``(p, ms, v)``).

    Attributes
    ----------
    forward_vs, backward_vs : numpy.ndarray
        ``(p, ticks)`` virtual stage of the forward (backward) a stage runs at a tick, ``V``
        (``V + 1``) where it runs none; ``ticks`` is every step's ticks together.
    below_vs : numpy.ndarray
        ``(p, ticks - 1)`` at ``k``: the backward the next stage down (ring order) runs at
        tick ``k + 1`` of the same step.
    descent : numpy.ndarray
        ``(p, ticks - 1)`` at ``k``: 0 where that backward waits for this stage's backward at
        ``k`` (the next stage down is entered by the dependency), ``-inf`` elsewhere.
    climb : numpy.ndarray
        ``(p, warm_ticks - 1)`` at ``k``: 0 where the forward of the stage at tick ``k + 1``
        waits for a warm-up forward of the previous stage (ring order) at ``k``, ``-inf``
        elsewhere.
    starts : tuple[int, ...]
        Per micro-batch count, where its ticks start on the row.
    ends : tuple[int, ...]
        Per micro-batch count, the tick of the step's last op (stage 0's last backward), from
        the step's first tick.
    warm_ticks : int
        Ticks that hold every stage's warm-up and the first tick after it (the same for every
        micro-batch count of the lattice).
    groups : tuple[int, ...]
        Per step, its groups of ``p`` micro-batches: a longest path makes at most one revolution
        down the ring per group and one for the fill and the drain.
    """

    forward_vs: npt.NDArray[np.intp]
    backward_vs: npt.NDArray[np.intp]
    below_vs: npt.NDArray[np.intp]
    descent: Array
    climb: Array
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    warm_ticks: int
    groups: tuple[int, ...]


@memoised(maxsize=1024)
def lattice(p: int, ms: tuple[int, ...], v: int) -> Lattice:
    """The tick lattice of interleaved 1F1B on ``p`` stages, ``v`` chunks, for each micro-batch
    count of ``ms``."""
    if p < 2 or v < 2 or any(m < p or m % p for m in ms) or (len(ms) > 1 and min(ms) < 2 * p):
        raise InvariantError(f"interleaved lattice needs p, v >= 2 and p | m (and m >= 2p for "
                             f"several), got {p}, {ms}, {v}")
    big_v = p * v
    ends = tuple(m * v + big_v + p - 2 for m in ms)
    stage = np.arange(p)[:, None]
    below = np.roll(np.arange(p), 1)  # the stage a descent from stage i enters: i - 1
    forwards, backwards, belows = [], [], []
    for m, end in zip(ms, ends, strict=True):
        n = np.arange(m * v)
        chunk = (n % big_v) // p  # chunk of the n-th forward (Megatron's get_model_chunk_id)
        forward = np.full((p, end + 1), big_v, dtype=np.intp)
        backward = np.full((p, end + 1), big_v + 1, dtype=np.intp)
        forward[stage, n + stage] = chunk * p + stage
        backward[stage, n + big_v + p - 2 - stage] = (v - 1 - chunk) * p + stage
        forwards.append(forward)
        backwards.append(backward)
        down = backward[below]
        down[:, 0] = big_v + 1  # no step crosses from one step's row into the next
        belows.append(np.roll(down, -1, axis=1))
    below_vs = np.ascontiguousarray(np.concatenate(belows, axis=1)[:, :-1])
    descent = np.where(below_vs < big_v - 1, 0.0, _NEG)  # the backward of the last vs waits
    # for its own forward, not for a stage above
    # stage i's warm-up ends at tick i + warm_i <= 2p - 2 + (v-1)p (stage 0), the same for every
    # m >= 2p (uncapped); one more tick for the first climb out of it
    warm = np.minimum(2 * (p - 1 - np.arange(p)) + (v - 1) * p, min(ms) * v)
    warm_ticks = min(ends[0] + 1, int(np.max(np.arange(p) + warm)) + 2)
    tick = np.arange(warm_ticks - 1)
    # (i, k): stage i-1 (ring order) is still in its warm-up at tick k
    source_warm = tick[None, :] < np.roll(np.arange(p) + warm, 1)[:, None]
    fwd = forwards[0][:, 1:warm_ticks]
    climb = np.where(source_warm & (fwd < big_v) & (fwd > 0), 0.0, _NEG)
    forward_vs = np.concatenate(forwards, axis=1)
    backward_vs = np.concatenate(backwards, axis=1)
    for array in (forward_vs, backward_vs, below_vs, descent, climb):
        array.flags.writeable = False
    starts = tuple(int(x) for x in np.cumsum((0, *ends[:-1])) + np.arange(len(ms)))
    return Lattice(forward_vs, backward_vs, below_vs, descent, climb, starts, ends, warm_ticks,
                   tuple(m // p for m in ms))


def _fill(lat: Lattice, f: Array, c: Array, base: Array) -> list[Array]:
    """Up the stages through the warm-up, around the ring while the wrap into stage 0 improves
    anything: per stage, ``E(k) + base(k)`` of its warm-up forwards (``-inf`` elsewhere) over
    the first ``lat.warm_ticks`` ticks (``(p, warm_ticks)`` arrays of one step)."""
    p, ticks = f.shape
    entry = np.full((p, ticks), _NEG)
    entry[0, 0] = f[0, 0] + base[0, 0]  # the step starts with stage 0's first forward
    rise = f[:, 1:] + base[:, 1:]
    rise += lat.climb
    rise[1:] += c[:-1, :-1]  # climbing into stage i from stage i - 1 (ring order)
    rise[0] += c[-1, :-1]
    entries, rises = list(entry), list(rise)
    q = np.empty(ticks)
    q_head = q[:-1]
    gain = np.empty(ticks - 1)
    tails = [row[1:] for row in entries]
    for revolution in range(ticks):
        for i in range(p):
            j = i + 1 if i + 1 < p else 0
            np.maximum.accumulate(entries[i], out=q)
            np.add(q_head, rises[j], out=gain)
            if (revolution or j == 0) and not (gain > tails[j]).any():
                return entries  # nothing changes further up the ring
            np.maximum(tails[j], gain, out=tails[j])
    return entries


def _longest_path(lat: Lattice, forward: Array, backward: Array) -> tuple[float, ...]:
    """The makespan of each step of ``lat``: per virtual stage op times, sends folded in, ``V``
    and ``V + 1`` the zero slots."""
    width, warm = len(lat.ends), lat.warm_ticks
    f = forward[lat.forward_vs]  # (p, ticks) of every step, end to end (fancy indexing: take
    # is slow on a read-only index array)
    b = backward[lat.backward_vs]
    work = f + b
    p, ticks = f.shape
    starts = np.array(lat.starts)
    ends = starts + np.array(lat.ends)
    c = np.cumsum(work, axis=1)  # C(k): a stage's work up to tick k, from its step's start
    for start in lat.starts[1:]:
        c[:, start:] -= c[:, start - 1:start].copy()
    base = b - c  # Q(k) = C(k) + cummax(E + base): E the entries at the backward's start
    # the warm-up is the same for every step of the lattice (all start alike)
    fill = _fill(lat, f[:, :warm], c[:, :warm], base[:, :warm])
    # Several steps are swept as one row, step j's values raised by j * lift: a running maximum
    # never carries a value into the next step's ticks above that step's own values, and what it
    # carries (at least ``lift`` below) never wins a maximum there.
    lift = 4.0 * float(c[:, ends].sum()) + 1.0
    raised = np.arange(width) * lift
    segment = np.repeat(np.arange(width), np.diff(np.append(starts, ticks)))
    # what the best path could still collect after tick k: every later tick's heaviest stage
    heaviest = work.max(axis=0)
    rest = np.cumsum(heaviest[::-1])[::-1] - heaviest  # the ticks after k, to the row's end
    rest -= (rest[ends] + raised)[segment]  # nothing after the step's own end
    # down the stages, revolution after revolution, while stage 0 gains anything that could
    # still beat the best end. ``e`` is C + cummax(E + base) - C: a stage's row Q - C; the next
    # stage down enters at tick k + 1 with Q(k) + its descent and base, so one addition of
    # ``step[i] = C_i(k) + descent(k) + base_{i-1}(k+1)`` carries a row to the next.
    step = backward[lat.below_vs]
    step += lat.descent
    step[1:] += c[1:, :-1]
    step[1:] -= c[:-1, 1:]  # the stage below stage i is i - 1 (ring order: stage 0's is p - 1)
    step[0] += c[0, :-1]
    step[0] -= c[-1, 1:]
    steps = list(step)
    best = np.full(width, _NEG)
    seen = np.full(ticks, _NEG)  # stage 0's row Q over every revolution so far
    e = np.full(ticks, _NEG)
    e_tail = e[1:]
    e_head = e[:-1]
    windows = [e[start:start + warm] for start in starts]
    order = list(range(p - 1, -1, -1))
    into = [steps[i + 1 if i + 1 < p else 0] for i in order]  # the step into each row
    accumulate = np.maximum.accumulate
    for revolution in range(max(lat.groups) + 1):
        if revolution == 0:
            for i, step_in in zip(order, into, strict=True):
                if i < p - 1:
                    np.add(e_head, step_in, out=e_tail)
                for window, lifted in zip(windows, raised, strict=True):
                    np.maximum(window, fill[i] + lifted, out=window)
                accumulate(e, out=e)
            e[starts] = _NEG  # no descent enters a step's first tick
        else:
            # a step of m micro-batches is done after m/p + 1 revolutions: sweep the others
            first = next(j for j, m in enumerate(lat.groups) if m >= revolution)
            row = e[starts[first]:]
            head, tail = row[:-1], row[1:]
            ins = [step_in[starts[first]:] for step_in in into]
            for step_in in ins:
                np.add(head, step_in, out=tail)
                accumulate(row, out=row)
        above = e + c[0]
        np.maximum(best, above[ends] - raised, out=best)
        if not ((above > seen) & (above + rest > best[segment])).any():
            break
        np.maximum(seen, above, out=seen)
    return tuple(float(x) for x in best)


def _tick_makespans(lat: Lattice, forward: Array, backward: Array) -> tuple[float, ...]:
    """The makespan of each step of ``lat``, op by op in tick order: exact.

    The lattice's theorem (module docstring) puts every dependency one tick earlier on the
    neighbouring stage (a forward on the stage before it in ring order, a backward on the one
    after it) and runs each stage's ops in tick order, forward first; so one pass over the ticks,
    each op starting when its stage is free and its dependency has ended, is the longest path,
    climbing paths included. ``p x ticks`` steps of Python: the sweeps take :func:`_longest_path`
    (vectorised) and this only where a stage is slower than its neighbours (a slow GPU), where the
    climbing paths it leaves out can lie on the critical path.
    """
    big_v = int(lat.forward_vs.max(initial=0))  # the empty forward slot is V
    p = lat.forward_vs.shape[0]
    out = []
    for start, end in zip(lat.starts, lat.ends, strict=True):
        fvs = lat.forward_vs[:, start:start + end + 1].tolist()
        bvs = lat.backward_vs[:, start:start + end + 1].tolist()
        free = [0.0] * p
        last_f = [0.0] * p  # each stage's forward finish at the previous tick
        last_b = [0.0] * p
        for k in range(end + 1):
            now_f, now_b = last_f[:], last_b[:]
            for i in range(p):
                vs = fvs[i][k]
                if vs < big_v:
                    dep = last_f[i - 1] if vs > 0 else 0.0  # i - 1 wraps to p - 1 (ring order)
                    free[i] = max(free[i], dep) + float(forward[vs])
                    now_f[i] = free[i]
                vs = bvs[i][k]
                if vs < big_v:
                    dep = last_b[(i + 1) % p] if vs < big_v - 1 else 0.0
                    free[i] = max(free[i], dep) + float(backward[vs])
                    now_b[i] = free[i]
            last_f, last_b = now_f, now_b
        out.append(max(free))
    return tuple(out)


def interleaved_makespan_s(p: int, m: int, v: int, forward_s: Sequence[float],
                           backward_s: Sequence[float], send_s: float,
                           exact: bool = False) -> float:
    """Step time of the idealised interleaved 1F1B pipeline, seconds (module docstring).

    Parameters
    ----------
    p, m, v : int
        Stages, micro-batches (a multiple of ``p``), virtual stages per stage (``v >= 2``).
    forward_s, backward_s : sequence of float
        One micro-batch's forward and full backward on each virtual stage ``vs = c p + i``
        (chunk ``c`` of stage ``i``), exposed TP/CP/EP communication included.
    send_s : float
        One pipeline message, blocking its sender: added to every forward but the last virtual
        stage's and every backward but the first's.
    exact : bool
        Walk the op order tick by tick (:func:`_tick_makespans`) instead of the vectorised
        longest path, which leaves out paths climbing the ring outside the warm-up (a slow GPU's
        stage can put them on the critical path).

    Returns
    -------
    float
        Seconds from the first forward to the last backward.
    """
    big_v = p * v
    if len(forward_s) != big_v or len(backward_s) != big_v:
        raise InvariantError(f"need {big_v} virtual stage times, got {len(forward_s)}, "
                             f"{len(backward_s)}")
    groups = m // p
    if groups <= DIRECT_GROUPS:
        return _makespans(p, (m,), v, tuple(forward_s), tuple(backward_s), send_s, exact)[0]
    before, last = _makespans(p, ((DIRECT_GROUPS - 1) * p, DIRECT_GROUPS * p), v,
                              tuple(forward_s), tuple(backward_s), send_s, exact)
    return last + (groups - DIRECT_GROUPS) * (last - before)


@memoised()
def _makespans(p: int, ms: tuple[int, ...], v: int, forward_s: tuple[float, ...],
               backward_s: tuple[float, ...], send_s: float,
               exact: bool = False) -> tuple[float, ...]:
    """:func:`interleaved_makespan_s` for each micro-batch count of ``ms`` (layouts that differ
    only in what the pipeline does not see, the ZeRO stage for one, share the answer)."""
    big_v = p * v
    forward = np.zeros(big_v + 2)
    backward = np.zeros(big_v + 2)
    forward[:big_v] = forward_s
    forward[:big_v - 1] += send_s
    backward[:big_v] = backward_s
    backward[1:big_v] += send_s
    if exact:
        return _tick_makespans(lattice(p, ms, v), forward, backward)
    return _longest_path(lattice(p, ms, v), forward, backward)


def needs_lattice(chunk_layers: Sequence[Sequence[int]]) -> bool:
    """Whether the virtual stages hold unequal layer counts (``chunk_layers[i][c]``: layers of
    stage ``i``'s chunk ``c``), the case the closed form's rounds do not hold: a chunk heavier
    than the others, on some stages or on all, makes every stage's work change from round to
    round."""
    return len({n for layers in chunk_layers for n in layers}) > 1
