"""The interleaved 1F1B pipeline as the longest path through its op order (perf/interleave.py).

Oracles: a direct simulation of the op order written here (every op starts when its stage is free
and its dependency has ended, sends blocking the sender), Narayanan et al.'s closed form for equal
virtual stages, and a timeline worked by hand.
"""

from __future__ import annotations

import random

import pytest

from simcluster.perf.interleave import interleaved_makespan_s, lattice, needs_lattice
from simcluster.sim.schedules import stage_order
from simcluster.sweep.space import balanced_split


def _simulate(p: int, m: int, v: int, forward: list[float], backward: list[float],
              send: float) -> float:
    """The step of the op order of sim/schedules.py, op by op: the reference."""
    orders = [stage_order("interleaved", p, m, i, v) for i in range(p)]
    last = p * v - 1
    done: dict[tuple[str, int, int], float] = {}
    position, free = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for i in range(p):
            while position[i] < len(orders[i]):
                op = orders[i][position[i]]
                vs = op.chunk * p + i
                if op.kind == "F":
                    needs = ("F", vs - 1, op.mb) if vs > 0 else None
                    work, sends = forward[vs], vs < last
                else:
                    needs = ("B", vs + 1, op.mb) if vs < last else ("F", vs, op.mb)
                    work, sends = backward[vs], vs > 0
                if needs is not None and needs not in done:
                    break
                start = max(free[i], done[needs] if needs else 0.0)
                free[i] = start + work + (send if sends else 0.0)
                done[(op.kind, vs, op.mb)] = free[i]
                position[i] += 1
                moved = True
    assert position == [len(order) for order in orders]  # no deadlock
    return max(free)


def _split(layers: int, p: int, v: int, logits: float = 0.45, send: float = 0.02
           ) -> tuple[list[float], list[float], float]:
    """A sweep's uneven split (sweep/space.py): forward 1 and backward 2.1 per layer, the logits
    on the last virtual stage, a small embedding on the first."""
    sizes = balanced_split(layers, p * v)
    forward = [1.0 * n for n in sizes]
    backward = [2.1 * n for n in sizes]
    forward[0] += 0.01
    backward[0] += 0.02
    forward[-1] += logits
    backward[-1] += 2.1 * logits
    return forward, backward, send


def test_every_dependency_is_one_tick_earlier_and_each_stage_runs_in_tick_order() -> None:
    """The lattice's theorem (module docstring): stage i's n-th forward at tick n + i + 1 - V, its
    n-th backward at n + p - 1 - i; every dependency then lies one tick earlier, and sorting a
    stage's ops by tick (forward first) gives Megatron's order."""
    for p, m, v in ((2, 2, 2), (3, 6, 2), (4, 8, 3), (4, 12, 2), (8, 8, 4)):
        big_v = p * v
        tick: dict[tuple[str, int, int], int] = {}
        for i in range(p):
            order = stage_order("interleaved", p, m, i, v)
            forwards = [op for op in order if op.kind == "F"]
            backwards = [op for op in order if op.kind == "B"]
            for n, op in enumerate(forwards):
                tick[("F", op.chunk * p + i, op.mb)] = n + i + 1 - big_v
            for n, op in enumerate(backwards):
                tick[("B", op.chunk * p + i, op.mb)] = n + p - 1 - i
            by_tick = sorted(order, key=lambda op: (tick[(op.kind, op.chunk * p + i, op.mb)],
                                                    op.kind != "F"))
            assert by_tick == order
        for (kind, vs, mb), k in tick.items():
            if kind == "F" and vs > 0:
                assert tick[("F", vs - 1, mb)] == k - 1
            if kind == "B" and vs < big_v - 1:
                assert tick[("B", vs + 1, mb)] == k - 1
        # the cached lattice lays the ops out so
        lat = lattice(p, (m,), v)
        for i in range(p):
            for n, op in enumerate(o for o in stage_order("interleaved", p, m, i, v)
                                   if o.kind == "F"):
                assert lat.forward_vs[i, n + i] == op.chunk * p + i


@pytest.mark.parametrize(("p", "v", "groups"), [(2, 2, 1), (4, 2, 3), (4, 3, 2), (8, 4, 2),
                                                (16, 2, 5)])
def test_equal_virtual_stages_give_narayanans_bubble(p: int, v: int, groups: int) -> None:
    """Equal chunks (forward f, backward b), no sends: m v (f + b) of work on every stage plus the
    bubble (p - 1)(t_f + t_b)/v = (p - 1)(f + b) of Narayanan et al. SC'21 s2.2.2."""
    m, f, b = groups * p, 0.75, 1.5
    step = interleaved_makespan_s(p, m, v, [f] * (p * v), [b] * (p * v), 0.0)
    assert step == pytest.approx((m * v + p - 1) * (f + b), rel=1e-12)


def test_a_timeline_worked_by_hand() -> None:
    """p = 2, v = 2, m = 2; virtual stage 1 (stage 1's first chunk) is twice as heavy: forwards
    (1, 2, 1, 1), backwards twice those. Stage 0 runs all four forwards first (warm-up
    2(p-1) + (v-1)p = 4), stage 1 two. By hand, [start, end]:
    s0 F0 mb0 [0,1], F0 mb1 [1,2]; s1 F1 mb0 [1,3], F1 mb1 [3,5]; s0 F2 mb0 [3,4] (waits for
    F1 mb0), F2 mb1 [5,6]; s1 F3 mb0 [5,6], B3 mb0 [6,8], F3 mb1 [8,9], B3 mb1 [9,11]; s0 B2 mb0
    [8,10], B2 mb1 [11,13]; s1 B1 mb0 [11,15], B1 mb1 [15,19]; s0 B0 mb0 [15,17], B0 mb1
    [19,21]. The step is 21; the closed form's 2 x 9 + (9 + 6)/2 / 2 = 21.75 does not see
    it."""
    forward = [1.0, 2.0, 1.0, 1.0]
    backward = [2 * x for x in forward]
    assert _simulate(2, 2, 2, forward, backward, 0.0) == 21.0
    assert interleaved_makespan_s(2, 2, 2, forward, backward, 0.0) == pytest.approx(21.0,
                                                                                      rel=1e-12)


@pytest.mark.parametrize("layers", [96, 126])
@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_the_sweeps_uneven_splits_match_the_op_by_op_simulation(layers: int, p: int) -> None:
    """Every uneven split a sweep enumerates for GPT-3 175B (96 layers) and Llama 3 405B (126),
    one to six groups of micro-batches (four and six extrapolated): the longest path is the
    simulated step, exactly on 153 of 170, never above it and at most 0.6% below it on the others
    (a forward chain climbing the ring outside the warm-up, left out)."""
    exact = 0
    for v in range(2, 9):
        if p * v > layers or layers % (p * v) == 0:
            continue
        forward, backward, send = _split(layers, p, v)
        for groups in (1, 2, 3, 4, 6):
            m = groups * p
            step = _simulate(p, m, v, forward, backward, send)
            path = interleaved_makespan_s(p, m, v, forward, backward, send)
            assert step * (1 - 0.007) <= path <= step * (1 + 1e-9), (p, v, groups)
            exact += path == pytest.approx(step, rel=1e-9)
    # of (10, 10, 15, 10) splits x groups for 96 layers, (25, 35, 35, 30) for 126
    assert exact == {(96, 2): 10, (96, 4): 10, (96, 8): 15, (96, 16): 10, (126, 2): 25,
                     (126, 4): 30, (126, 8): 23, (126, 16): 30}[(layers, p)]


@pytest.mark.parametrize(("layers", "p", "v"), [(126, 16, 7), (126, 16, 5), (96, 8, 7),
                                                (96, 16, 5), (126, 4, 8)])
def test_longer_steps_extrapolate_from_two_and_three_groups(layers: int, p: int, v: int) -> None:
    """Beyond three groups each group adds what the third added (the periodic steady state): the
    splits of the Llama 3 405B and GPT-3 175B sweeps' best layouts, exactly."""
    forward, backward, send = _split(layers, p, v)
    for groups in (4, 6, 9):
        m = groups * p
        assert interleaved_makespan_s(p, m, v, forward, backward, send) == pytest.approx(
            _simulate(p, m, v, forward, backward, send), rel=1e-9)


def test_the_longest_path_never_exceeds_the_simulated_step() -> None:
    """Arbitrary virtual stage times: the paths left out (a forward chain climbing the ring
    outside the warm-up) can only make the result shorter, never longer, and by little."""
    rng = random.Random(7)
    for _ in range(60):
        p, v, groups = rng.choice([2, 3, 4, 5]), rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
        forward = [rng.uniform(0.5, 2.0) for _ in range(p * v)]
        backward = [x * rng.uniform(1.5, 3.0) for x in forward]
        send = rng.choice([0.0, 0.05])
        step = _simulate(p, groups * p, v, forward, backward, send)
        path = interleaved_makespan_s(p, groups * p, v, forward, backward, send)
        assert step * 0.9 <= path <= step * (1 + 1e-12)


def test_unequal_virtual_stages_need_the_lattice() -> None:
    assert not needs_lattice(((2, 2), (2, 2)))  # even split
    assert needs_lattice(((1, 2), (2, 2)))  # a lighter first chunk (Llama 3 405B's)
    assert needs_lattice(((1, 2, 1), (1, 2, 1)))  # a heavier chunk on every stage


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_walk_is_the_op_by_op_simulation(seed: int) -> None:
    """``exact=True`` (the tick-by-tick walk a slow GPU's stage takes) equals the op-by-op
    reference to rounding on random stage times, one stage up to 3x slower, sends included:
    the lattice's theorem made the walk exact, climbing paths and all."""
    rng = random.Random(seed)
    p, v = rng.choice([(2, 2), (4, 2), (4, 3), (8, 4)])
    m = p * rng.choice([1, 2, 3])
    slow = rng.randrange(p)
    forward = [rng.uniform(0.5, 1.5) * (3.0 if vs % p == slow else 1.0) for vs in range(p * v)]
    backward = [2.0 * f * rng.uniform(0.9, 1.1) for f in forward]
    send = rng.uniform(0.0, 0.1)
    got = interleaved_makespan_s(p, m, v, forward, backward, send, exact=True)
    assert got == pytest.approx(_simulate(p, m, v, forward, backward, send), rel=1e-12)
