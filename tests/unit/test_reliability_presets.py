"""Failure sources beyond one per-node rate (issue 25 item 3): lemon nodes, job-level failures and
the reliability presets that carry published rates.

Kokolis et al. 2024 (Meta RSC-1, arXiv 2410.21680) measure a job MTTF of 47.7 days at 8 GPUs and
7.9 h at 1,024 GPUs, and project 1.8 h at 16,384 GPUs and 0.23 h at 131,072 from r_f = 6.50 per
1,000 node-days; 6.5e-3 alone gives 28.8 h at 1,024 GPUs. The ``rsc1`` preset has r_f, the share of
lemon nodes the paper found (1.2%) and their hazard derived from its other published pair (removing
the lemons cut 512+-GPU job failures from 14% to 4%: m = 226). Neither anchor below was used.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.errors import SpecError
from simcluster.horizon import simulate_config
from simcluster.horizon.config import (
    JOB_CLASS,
    LLAMA3_CLASSES,
    LLAMA3_FABRIC,
    horizon_config,
    lemon_factor,
)
from simcluster.spec import load_scenario
from simcluster.spec.scenario import FailureClassSpec, ReliabilitySpec, Scenario

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = load_scenario(ROOT / "scenarios" / "default.yaml")
DAY, HOUR = 86400.0, 3600.0


def _preset(name: str, nodes: int, **keys: object) -> Scenario:
    """The default scenario on ``nodes`` DGX A100 nodes with reliability preset ``name``."""
    path = ROOT / "scenarios" / "default.yaml"
    sets = [f"reliability.preset={name}", f"cluster.nodes={nodes}", "parallelism.tp=8",
            "parallelism.pp=1", f"parallelism.global_batch={8 * nodes}"]
    sets += [f"reliability.{k}={v}" for k, v in keys.items()]
    return load_scenario(path, sets)


def _job_mttf_h(s: Scenario) -> float:
    return 1.0 / horizon_config(s, 1.0).failure_rate_s / HOUR


def test_lemon_factor_oracle() -> None:
    """1 + f (m - 1): RSC-1's 1.2% of lemons at 226x make a job's node fail 3.70x as often."""
    rel = ReliabilitySpec(lemon_fraction=0.012, lemon_multiplier=226.0)
    assert lemon_factor(rel) == pytest.approx(1 + 0.012 * 225)
    assert lemon_factor(rel) == pytest.approx(math.log(0.86) / math.log(0.96), rel=0.01)


def test_rsc1_reproduces_the_measured_1024_gpu_mttf() -> None:
    """Kokolis et al.: 7.9 h at 1,024 GPUs (128 nodes), measured; the preset: 7.8 h (within 3%)."""
    assert _job_mttf_h(_preset("rsc1", 128)) == pytest.approx(7.9, rel=0.03)


def test_rsc1_at_8_gpus() -> None:
    """Kokolis et al.: 47.7 days at 8 GPUs, measured; the preset: 47.1 days. NOT an independent
    check: a one-node job escapes the fabric class (InfiniBand links, the paper's first cause),
    whose share (0.117) is fitted to the ratio of the two measured MTTFs; without that class the
    preset gives 41.6 days (docs/reliability.md, Presets)."""
    assert _job_mttf_h(_preset("rsc1", 1)) / 24 == pytest.approx(47.7, rel=0.02)
    rel = _preset("rsc1", 1).reliability
    assert rel is not None
    node_only = _preset("rsc1", 1, classes="{node: {share: 1.0, replace: true}}")
    assert _job_mttf_h(node_only) / 24 == pytest.approx(41.6, rel=0.01)


def test_fabric_classes_stop_only_jobs_that_span_nodes() -> None:
    """Oracle: a one-node job's rate leaves out the fabric classes; two nodes count them."""
    classes = {"node": FailureClassSpec(share=0.75), "ib": FailureClassSpec(share=0.25, fabric=True)}
    one = horizon_config(_with_rel(1, failure_rate_per_node_day=1.0, classes=classes), 1.0)
    two = horizon_config(_with_rel(2, failure_rate_per_node_day=1.0, classes=classes), 1.0)
    assert one.failure_rate_s == pytest.approx(0.75 / DAY)
    assert two.failure_rate_s == pytest.approx(2.0 / DAY)


@pytest.mark.parametrize(("nodes", "hours"), [(2048, 1.8), (16384, 0.23)])
def test_rsc1_hardware_rate_gives_the_published_projection(nodes: int, hours: float) -> None:
    """Kokolis et al. project from r_f alone: 1.8 h at 16,384 GPUs and 0.23 h at 131,072; the
    preset with its lemons removed (``lemon_fraction: 0``) gives the same to the published digits."""
    s = _preset("rsc1", nodes, lemon_fraction=0)
    assert _job_mttf_h(s) == pytest.approx(hours, abs=0.005 if hours < 1 else 0.05)


def test_rsc2_rate() -> None:
    """RSC-2: 2.34 failures per 1,000 node-days (Kokolis et al.); lemons 1.6% at RSC-1's hazard."""
    rel = _preset("rsc2", 1).reliability
    assert rel is not None
    assert rel.failure_rate_per_node_day == pytest.approx(2.34e-3)
    assert _job_mttf_h(_preset("rsc2", 2, lemon_fraction=0)) / 24 == pytest.approx(1 / 2.34e-3 / 2)


def test_a_given_key_overrides_the_preset() -> None:
    s = _preset("rsc1", 4, failure_rate_per_node_day=0.001)
    assert s.reliability is not None
    assert s.reliability.failure_rate_per_node_day == pytest.approx(0.001)
    assert s.reliability.lemon_fraction == pytest.approx(0.012)


def test_unknown_preset_names_the_key() -> None:
    with pytest.raises(SpecError, match=r"reliability\.preset.*rsc1"):
        load_scenario(ROOT / "scenarios" / "default.yaml", ["reliability.preset=rsc"])


def _with_rel(nodes: int, **keys: object) -> Scenario:
    s = dataclasses.replace(DEFAULT, reliability=ReliabilitySpec(**keys))  # type: ignore[arg-type]
    return dataclasses.replace(s, cluster=dataclasses.replace(s.cluster, nodes=nodes))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4096), st.floats(0.0, 20.0), st.floats(0.0, 0.05), st.floats(1.0, 500.0))
def test_job_failures_do_not_grow_with_the_job(nodes: int, job_rate: float, frac: float,
                                               mult: float) -> None:
    """Property: the job's failure rate is the per-node classes x nodes x the lemon factor, plus the
    job-level rate whatever the node count; lemons raise only node-replacing classes; a one-node
    job leaves out the Llama 3 mix's fabric classes (nic, network)."""
    s = _with_rel(nodes, failure_rate_per_node_day=1e-3, job_failures_per_day=job_rate,
                  lemon_fraction=frac, lemon_multiplier=mult)
    cfg = horizon_config(s, 1.0)
    rel = s.reliability
    assert rel is not None
    total = sum(row[0] for row in LLAMA3_CLASSES.values())
    present = {n: row for n, row in LLAMA3_CLASSES.items()
               if not (nodes == 1 and n in LLAMA3_FABRIC)}  # a one-node job: no fabric classes
    replaced = sum(row[0] for row in present.values() if row[4]) / total
    in_place = sum(row[0] for row in present.values() if not row[4]) / total
    per_node = 1e-3 / DAY * (replaced * lemon_factor(rel) + in_place)
    expected = nodes * per_node + job_rate / DAY
    assert cfg.failure_rate_s == pytest.approx(expected, rel=1e-9)
    job = [c for c in cfg.classes if c.name == JOB_CLASS]
    assert len(job) == (1 if job_rate > 0 else 0)
    assert all(not c.replace for c in job)


def test_job_class_name_is_reserved() -> None:
    s = _with_rel(2, job_failures_per_day=1.0,
                  classes={"job": FailureClassSpec(share=1.0, replace=False)})
    with pytest.raises(SpecError, match=r"reliability\.classes\.job"):
        horizon_config(s, 1.0)


def test_job_failures_are_counted_and_restart_in_place() -> None:
    """A job-level failure interrupts the job (its own class in the counts) and takes no node."""
    s = _with_rel(4, failure_rate_per_node_day=0.0, job_failures_per_day=2.0,
                  horizon_s=20 * DAY)
    cfg = horizon_config(s, 1.0)
    result = simulate_config(cfg, replicas=20, seed=1).to_dict()
    by_class = result["interruptions"]["by_class"]
    assert by_class[JOB_CLASS] == pytest.approx(40.0, rel=0.2)  # 2 a day for 20 days
    assert result["spare_exhaustions"] == 0.0
