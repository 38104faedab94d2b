"""A finished sweep takes ``--rerank`` and ``--goodput`` later, in place (issue 24 item 6): its
identity leaves out what only ranks or re-times the stored rows, so the analytical chunks are
read back, not recomputed."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from simcluster.cli import main
from simcluster.sweep.config import Plan
from simcluster.sweep.driver import identity_of
from tests.tiny import tiny_scenario

SEARCH = ["--search", "tp=1,2", "--search", "pp=1,2", "--search", "micro_batch=1,2"]


def test_the_identity_leaves_out_ranking_and_later_passes(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("x")), encoding="utf-8")
    base = Plan(settings=())
    same = [Plan(settings=(), top=3), Plan(settings=(), rerank=5), Plan(settings=(), goodput=2),
            Plan(settings=(), objective="cost_usd")]
    for plan in same:
        assert identity_of(path, [], plan, {}) == identity_of(path, [], base, {})
    assert identity_of(path, [], Plan(settings=(), layouts="fixed"), {}) != \
        identity_of(path, [], base, {})


def test_a_finished_sweep_is_reranked_in_place(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario("x")), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["sweep", str(path), *SEARCH, "--out", str(out), "--quiet"]) == 0
    parts = {p.name: p.stat().st_mtime_ns for p in (out / "parts").iterdir()}
    capsys.readouterr()
    assert main(["sweep", str(path), *SEARCH, "--rerank", "2", "--out", str(out), "--quiet"]) == 0
    assert "took analytical" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in (out / "parts").iterdir()} == parts  # reused
    table = pq.read_table(out / "results.parquet").to_pylist()
    engines = [r["engine"] for r in table if r["rank"] is not None]
    assert engines.count("des") == 2
