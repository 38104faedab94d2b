"""The seeds' scenarios (scenarios/seed-*.yaml, docs/seeds.md) and their figure scripts.

Every scenario loads, validates (its sweep section included) and runs with ``--fast``; the
interruption-free probability has oracles (the seed's own 1-(1-p)^128 example, and the horizon
engine's simulated share); each figure script writes its PNGs on small inputs.
"""

from __future__ import annotations

import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS = ROOT / "analysis"
SIMCLUSTER = str(Path(sys.executable).with_name("simcluster"))
SEEDS = sorted((ROOT / "scenarios").glob("seed-*.yaml"))

sys.path.insert(0, str(ANALYSIS))
import plot_seed_hardware  # noqa: E402
import plot_seed_reliability  # noqa: E402


def test_the_six_seed_scenarios_are_there() -> None:
    assert [p.stem for p in SEEDS] == [
        "seed-1000gpu-uninterrupted", "seed-10b-boxes", "seed-checkpoint-modes", "seed-comm-share",
        "seed-degraded-stragglers", "seed-spares-elastic"]


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_seed_scenario_loads_validates_and_runs_fast(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    comments = re.sub(r"\s*\n#\s*", " ", path.read_text(encoding="utf-8"))  # comment lines joined
    assert "simcluster seed document: " in comments  # cited by title, as docs/seeds.md does
    for args in (["validate", str(path)], ["run", str(path), "--fast"]):
        done = subprocess.run([SIMCLUSTER, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr


def test_interruption_free_probability_oracles() -> None:
    # The seed's example: a 1% chance per node, 128 nodes -> 72.37% chance that one fails.
    assert 1 - plot_seed_reliability.p_uninterrupted(0.01, 128) == pytest.approx(0.7237, abs=5e-5)
    # Exponential failures: (1 - p)^n with p = 1 - exp(-rate T) is exp(-n rate T).
    p = plot_seed_reliability.p_node_failure(3.79e-3, 24.0)
    assert p == pytest.approx(1 - math.exp(-3.79e-3))
    assert plot_seed_reliability.p_uninterrupted(p, 125) == pytest.approx(math.exp(-125 * 3.79e-3))


def test_seeds_doc_quotes_the_closed_form() -> None:
    text = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    s = load_scenario(ROOT / "scenarios" / "seed-1000gpu-uninterrupted.yaml")
    assert s.reliability is not None
    for hours in plot_seed_reliability.HORIZONS_H:
        p = plot_seed_reliability.p_node_failure(s.reliability.failure_rate_per_node_day, hours)
        value = plot_seed_reliability.p_uninterrupted(p, s.cluster.nodes)
        assert f"| {value:.3g} |".replace("e-05", "e-5") in text


def test_horizon_engine_agrees_with_the_closed_form() -> None:
    rows = plot_seed_reliability.uninterrupted_rows(replicas=1000)
    assert [r["hours"] for r in rows] == [8.0, 24.0, 504.0]
    for r in rows:
        se = math.sqrt(r["closed_form"] * (1 - r["closed_form"]) / 1000)
        assert abs(r["simulated"] - r["closed_form"]) <= 4 * se + 1e-3, r
        assert r["simulated_interruptions"] == pytest.approx(r["expected_interruptions"], rel=0.1)
    assert rows[0]["closed_form"] > 0.8 > rows[1]["closed_form"] > 0.6 > 1e-4 > rows[2]["closed_form"]


def test_comm_share_falls_with_accumulation_and_is_higher_on_pcie() -> None:
    rows = plot_seed_hardware.comm_shares(ROOT / "scenarios" / "seed-comm-share.yaml")
    share = {(r["option"], r["micro_batches"]): r["comm_share"] for r in rows}
    assert sorted(share) == [(o, m) for o in ("nvlink", "pcie") for m in (4, 16, 64)]
    for option in ("nvlink", "pcie"):
        assert share[option, 4] > share[option, 16] > share[option, 64] > 0
    for m in (4, 16, 64):
        assert share["pcie", m] > share["nvlink", m]


def _script(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ANALYSIS / script), "--out-dir", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"MPLBACKEND": "Agg", "PATH": str(Path(sys.executable).parent)})


@pytest.mark.parametrize(("script", "args", "pngs"), [
    ("plot_seed_hardware.py", (), ("seed-10b-boxes", "seed-comm-share")),
    ("plot_seed_reliability.py", ("--replicas", "200", "--goodput-replicas", "5"),
     ("seed-uninterrupted", "seed-checkpoint-modes", "seed-spares-elastic")),
    ("plot_seed_perturb.py", ("--replicas", "10"), ("seed-degraded-stragglers",)),
])
def test_figure_script_writes_its_pngs(tmp_path: Path, script: str, args: tuple[str, ...],
                                       pngs: tuple[str, ...]) -> None:
    done = _script(tmp_path, script, *args)
    assert done.returncode == 0, done.stderr
    for name in pngs:
        png = tmp_path / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000
    assert list(tmp_path.glob("*.csv"))


def _figure_csv(name: str) -> list[dict[str, str]]:
    with (ROOT / "docs" / "img" / f"{name}.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _row(text: str, start: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(start)]
    assert len(rows) == 1, f"docs/seeds.md has {len(rows)} rows starting {start!r}"
    return rows[0]


def test_seeds_doc_quotes_the_committed_figures() -> None:
    """docs/seeds.md says its numbers are those of the committed figures: the CSVs beside them
    (written by ``python analysis/make_figures.py``) hold each quoted value at its precision."""
    text = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    boxes = {r["option"]: r for r in _figure_csv("seed-10b-boxes")}
    for option, row in (("4x3090ti-nvlink", "| 4x 3090 Ti, NVLink |"),
                        ("2x3090ti-nvlink", "| 2x 3090 Ti"), ("dgx-a100", "| DGX A100 80GB"),
                        ("rented-a100-40gb", "| DGX A100 40GB"), ("rented-h100", "| DGX H100")):
        line = _row(text, row)
        assert f"| {float(boxes[option]['time_to_train_days']):.2f} |" in line, option
        assert f"| {float(boxes[option]['cost_usd']):,.0f} |" in line, option
    for r in _figure_csv("seed-checkpoint-modes"):
        line = _row(text, f"| {r['option']} |")
        assert f"| {float(r['goodput']):.4f} | {float(r['goodput_time_to_train_days']):.2f} |" in line
    for r in _figure_csv("seed-comm-share"):
        assert f"{100 * float(r['comm_share']):.1f}%" in text, r
    for r in _figure_csv("seed-degraded-steps"):
        assert f"{float(r['step_time_s']):.2f}" in text, r["case"]
    for r in _figure_csv("seed-straggler-detect"):
        assert f"{100 * float(r['goodput']):.1f}%" in text, r["straggler_detect_s"]

