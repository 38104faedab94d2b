"""``simcluster reliability`` wiring (``cli_reliability.add_parser``): JSON fields, text, bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from simcluster import cli_reliability
from simcluster.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
SMALL = str(ROOT / "scenarios" / "1k-h100-reliability.yaml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simcluster")
    cli_reliability.add_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    args = _parser().parse_args(["reliability", *argv])
    assert args.handler(args) == 0
    return capsys.readouterr().out


def test_json_carries_design_fields(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, SMALL, "--replicas", "20", "--interval-sweep", "10:30:10", "--json",
               "--set", "reliability.horizon_days=20")
    d = json.loads(out)
    for key in ("interruptions", "goodput", "effective_training_time_ratio", "time_to_train_days",
                "lost_time_breakdown_h", "interval_sweep", "optimal_interval_min",
                "young_interval_min", "daly_interval_min"):
        assert key in d
    assert set(d["time_to_train_days"]) >= {"p50", "p95"}
    assert set(d["interruptions"]) >= {"total", "by_class"}
    assert [p["interval_min"] for p in d["interval_sweep"]] == pytest.approx([10, 20, 30], abs=0.2)
    assert sum(d["lost_time_breakdown_h"].values()) == pytest.approx(d["lost_time_total_h"])


def test_text_output_and_seed_determinism(capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(capsys, SMALL, "--replicas", "10", "--seed", "3", "--set", "reliability.horizon_days=10")
    for word in ("goodput", "lost time", "interruptions"):
        assert word in first
    assert first == _run(capsys, SMALL, "--replicas", "10", "--seed", "3",
                         "--set", "reliability.horizon_days=10")


@pytest.mark.parametrize("sweep", ["10:5:1", "a:b:c", "0:10:1", "1:10:0"])
def test_bad_sweep_is_a_usage_error(sweep: str) -> None:
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["reliability", SMALL, "--interval-sweep", sweep])
    assert exc.value.code == 2


def test_parse_sweep_includes_stop() -> None:
    assert cli_reliability.parse_sweep("5:15:5") == [300.0, 600.0, 900.0]


def test_missing_reliability_section_is_a_spec_error(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "1k-h100-reliability.yaml").read_text()
    path = tmp_path / "s.yaml"
    path.write_text(text[:text.index("reliability:")])
    args = _parser().parse_args(["reliability", str(path)])
    with pytest.raises(SpecError, match="reliability"):
        args.handler(args)


def test_a_layout_that_does_not_fit_is_said_to(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 item 3: reliability on a layout over the GPU memory warns (the flagship 405B
    layout needs more than 80 GB per simcluster today); a layout that fits does not."""
    from simcluster.cli_reliability import memory_warnings
    from simcluster.spec import load_scenario

    big = load_scenario(str(ROOT / "scenarios" / "llama3-405b-16k-h100.yaml"))
    (line,) = memory_warnings(big)
    assert line.startswith("the layout does not fit: it needs ")
    assert "80.0 GiB available" in line
    assert memory_warnings(load_scenario(str(ROOT / "scenarios" / "1k-h100-reliability.yaml"))) == []
