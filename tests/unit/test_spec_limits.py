"""Upper limits on node-level counts and model dimensions: refused up front, key and limit named.

Each used to hang or crash: 8e6 NICs per node (a link graph of millions of vertices), vocab 5e13 (a
MemoryError building gradient buckets), hidden 2**20 (a million DES bucket transfers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster.cli import main
from simcluster.perf import comm_plan
from simcluster.sim import durations
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "scenarios" / "default.yaml")


@pytest.mark.parametrize(("override", "limit"), [
    ("cluster.topology.scale_out.nics_per_node=8e6", "64"),
    ("cluster.topology.gpus_per_node=1e9", "1024"),
    ("cluster.topology.host.cpu_sockets=1e9", "16"),
    ("model.vocab=5e13", str(2**24)),
    ("model.hidden=8e15", str(2**20)),
    ("model.layers=20000", "10000"),
    ("model.seq_len=1e12", str(2**24)),
])
def test_absurd_sizes_are_refused_naming_key_and_limit(capsys: pytest.CaptureFixture[str],
                                                       override: str, limit: str) -> None:
    assert main(["run", DEFAULT, "--fast", "--contention", "on", "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert override.split("=")[0] in err
    assert f"<= {limit}" in err


def test_gradient_buckets_are_capped_per_chunk() -> None:
    huge = load_scenario(DEFAULT, ("model.hidden=1048576",))
    stages = durations.stage_durations(huge)
    assert max(len(b) for st in stages for b in st.buckets) == comm_plan.MAX_BUCKETS
    normal = durations.stage_durations(load_scenario(DEFAULT))
    assert max(len(b) for st in normal for b in st.buckets) < comm_plan.MAX_BUCKETS
