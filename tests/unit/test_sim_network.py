"""Links shared max-min fairly, re-planned on arrival and departure."""

from __future__ import annotations

import pytest
import simpy

from simcluster.errors import InvariantError
from simcluster.sim.network import Network, Transfer, max_min_shares


def _finish_times(starts: list[tuple[float, tuple[str, ...], float]],
                  capacity: dict[str, float] | None = None) -> list[float]:
    env = simpy.Environment()
    net = Network(env, capacity)
    ends: dict[int, float] = {}

    def start(i: int, at: float, links: tuple[str, ...], work: float):  # type: ignore[no-untyped-def]
        yield env.timeout(at)
        done: Transfer = yield net.transfer(f"t{i}", links, work)
        assert done.name == f"t{i}"
        ends[i] = env.now

    for i, (at, links, work) in enumerate(starts):
        env.process(start(i, at, links, work))
    env.run()
    return [ends[i] for i in range(len(starts))]


def test_alone_a_transfer_takes_its_work() -> None:
    assert _finish_times([(0.0, ("a",), 2.0)]) == [2.0]


def test_two_transfers_on_one_link_share_it_equally() -> None:
    assert _finish_times([(0.0, ("a",), 1.0), (0.0, ("a",), 1.0)]) == [2.0, 2.0]


def test_disjoint_links_do_not_interfere() -> None:
    assert _finish_times([(0.0, ("a",), 1.0), (0.0, ("b",), 1.0)]) == [1.0, 1.0]


def test_arrival_halfway_replans_the_first() -> None:
    # t0 alone for 0.5 s (0.5 done), then both at half rate: t0 ends at 1.5, t1 gets its last
    # 0.5 s alone after that: 1.0 done at 1.5, ends at 2.0.
    assert _finish_times([(0.0, ("a",), 1.0), (0.5, ("a",), 1.0)]) == pytest.approx([1.5, 2.0])


def test_the_most_loaded_link_sets_the_rate() -> None:
    ends = _finish_times([(0.0, ("a", "b"), 1.0), (0.0, ("b",), 1.0), (0.0, ("b",), 1.0)])
    assert ends == pytest.approx([3.0, 3.0, 3.0])


def test_capacity_scales_speed() -> None:
    assert _finish_times([(0.0, ("a",), 1.0)], {"a": 2.0}) == [0.5]


def test_zero_work_completes_at_once_and_negative_is_refused() -> None:
    assert _finish_times([(1.0, ("a",), 0.0)]) == [1.0]
    with pytest.raises(InvariantError):
        Network(simpy.Environment()).transfer("x", ("a",), -1.0)


def test_capacity_left_by_a_flow_limited_elsewhere_goes_to_the_others() -> None:
    # t0 crosses a and b; a carries t0, t1, t2 (1/3 each). Equal shares would give t3 half of b;
    # max-min gives it what t0 leaves, 2/3, so it ends at 1.5 (not 2.0). The others end at 3.0.
    ends = _finish_times([(0.0, ("a", "b"), 1.0), (0.0, ("a",), 1.0), (0.0, ("a",), 1.0),
                          (0.0, ("b",), 1.0)])
    assert ends == pytest.approx([3.0, 3.0, 3.0, 1.5])


def test_max_min_shares_hand_computed() -> None:
    # Links ab, bc, cd of capacity 1; flow 0 crosses all three, flow 1 ab, flow 2 bc, flow 3
    # bc + cd. bc saturates first with three flows (1/3 each, freezing 0, 2 and 3); cd keeps 1/3
    # unused; ab gives flow 1 what flow 0 leaves, 2/3.
    paths = [("ab", "bc", "cd"), ("ab",), ("bc",), ("bc", "cd")]
    assert max_min_shares(paths) == pytest.approx([1 / 3, 2 / 3, 1 / 3, 1 / 3])


def test_max_min_shares_honours_capacities_and_a_lone_transfer() -> None:
    assert max_min_shares([("a", "b")], {"a": 0.5}) == [0.5]
    assert max_min_shares([("a",), ("a", "b"), ("b",)], {"a": 2.0, "b": 1.0}) == \
        pytest.approx([1.5, 0.5, 0.5])
