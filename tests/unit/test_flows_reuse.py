"""Tier B reuses one incidence (and its solved rates) across message sizes, bit for bit.

The sweep used to rebuild the link x class incidence for every size; these tests pin that the
reused incidence and the rate memo give exactly the floats of a fresh :func:`simulate`.
"""

from __future__ import annotations

import pytest

from simcluster.flows.engine import incidence, run, simulate
from simcluster.flows.plan import FlowClass, Phase, Transfer
from simcluster.flows.tier_b import FlowModel, phase_latencies_s, ramp_bytes
from simcluster.perf.collectives import comm_group
from simcluster.perf.collectives_formulas import phase_steps
from simcluster.spec.loader import load_topology
from tests.flows_reference import scaled, with_latencies

SIZES = [2.0**k for k in range(6, 34, 3)]
A = (("x", 0), ("y", 0))
B = (("y", 0), ("z", 0))


def _fresh_time(model: FlowModel, op: str, algo: str, protocol: str, nbytes: float,
                size: int) -> float:
    """The pre-reuse computation: scale the plan, add latencies, build and simulate from scratch."""
    ranks = list(range(size))
    group = comm_group(model.topo, size, 1)
    per_node = model.topo.gpus_per_node
    nodes = -(-size // per_node)
    steps = phase_steps(op, algo, size, nodes, min(per_node, size))
    plan = model.plan(op, algo, ranks)
    transfer = scaled(plan, max(nbytes, ramp_bytes(group, protocol)))
    transfer = with_latencies(transfer, phase_latencies_s(group, protocol, steps))
    return simulate([transfer], model.capacities([plan], protocol)).finish_s[0]


@pytest.mark.parametrize(("topology", "nodes", "op", "algo"), [
    ("dgx-h100", 4, "all_reduce", "ring"),
    ("dgx-h100", 4, "all_reduce", "tree"),
    ("dgx-a100-40gb", 3, "all_reduce", "hierarchical"),
    ("dgx-2", 2, "all_to_all", "pairwise"),
])
@pytest.mark.parametrize("protocol", ["LL", "Simple"])
def test_reused_incidence_equals_a_fresh_simulation(topology: str, nodes: int, op: str, algo: str,
                                                    protocol: str) -> None:
    model = FlowModel(load_topology(topology), nodes)
    gpus = nodes * model.topo.gpus_per_node
    for nbytes in SIZES:
        reused = model.collective_time(op, nbytes, gpus, 1, algo, protocol).time_s
        assert reused == _fresh_time(model, op, algo, protocol, nbytes, gpus)


def test_run_with_a_shared_memo_equals_simulate_for_every_size() -> None:
    """Two phases, flows that finish at different times: several active sets, memo hits."""
    plan = Transfer((Phase((FlowClass(((A, 1.0),), 1.0), FlowClass(((A, 1.0), (B, 2.0)), 3.0, 2))),
                     Phase((FlowClass(((B, 1.0),), 2.0),), 0.5)), 0.25)
    caps = {A: 10.0, B: 4.0}
    idx = incidence([plan], caps)
    memo: dict[bytes, object] = {}
    for factor in (1.0, 7.0, 1e6):
        expected = simulate([scaled(plan, factor)], caps)
        got = run(idx, idx.size * factor, [[0.0, 0.5]], [0.25], memo)  # type: ignore[arg-type]
        assert got == expected
    assert memo  # the rates were shared across the sizes
