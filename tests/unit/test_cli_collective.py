"""``simcluster collective``: single size, nccl-tests table, JSON, tiers, bad input exits 2."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

import pytest

from simcluster import cli
from simcluster.cli_collective import parse_sizes
from simcluster.errors import SpecError
from tests.validation.test_collectives_published import SWEEP


def test_cli_registers_the_collective_subcommand() -> None:
    """The real parser of cli.py (no fixture re-registers it) has the subcommand."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "collective" in sub.choices


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["collective", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_sizes_doubles_like_nccl_tests() -> None:
    assert parse_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert len(parse_sizes("1K:8G")) == 24
    assert parse_sizes("1G") == [2**30]
    assert parse_sizes("3:10") == [3, 6]


@pytest.mark.parametrize("text", ["1X", "8G:1K", "0:1K", "-1", "1:2:3"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(SpecError, match="--bytes"):
        parse_sizes(text)


def test_single_size_prints_time_and_bandwidths(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--topology", "dgx-a100-80gb", "--bytes", "1G")
    assert code == 0
    # The printed bus bandwidth against nccl-tests on 8 x A100 at 1 GiB, 229.04 GB/s
    # (calibration allreduce_8xA100_nvlink3_nccltests_sweep; the validation tolerance there is
    # 5% at >= 1 GiB), not a copy of today's output.
    match = re.search(r"busbw\s+([0-9.]+) GB/s", out)
    assert match is not None
    assert float(match.group(1)) == pytest.approx(dict(SWEEP)[2**30], rel=0.05)
    assert "ring (Simple)" in out


def test_range_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--topology", "dgx-a100-80gb", "--nodes", "1", "--op", "all_reduce",
                        "--bytes", "1K:8G")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["size", "(B)"]
    assert len(lines) == 3 + 24
    assert lines[-1].split()[0] == str(8 * 2**30)


def test_json_is_one_object_with_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--topology", "dgx-h100", "--nodes", "2", "--bytes", "1M:4M",
                        "--tier", "B", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["gpus"] == 16
    assert data["tier"] == "B"
    assert [r["size_bytes"] for r in data["rows"]] == [2**20, 2**21, 2**22]
    assert all(r["busbw_GBps"] > 0 for r in data["rows"])


def test_gpus_and_algo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--topology", "dgx-a100-80gb", "--gpus", "4", "--bytes", "64M",
                        "--algo", "ring", "--json")
    assert code == 0
    assert json.loads(out)["rows"][0]["algorithm"] == "ring"


@pytest.mark.parametrize(("argv", "key"), [
    (["--bytes", "1Q"], "--bytes"),
    (["--bytes", "1M", "--op", "allreduce"], "--op"),
    (["--bytes", "1M", "--algo", "magic"], "--algo"),
    (["--bytes", "1M", "--algo", "nvls"], "--algo"),
    (["--bytes", "1M", "--algo", "rhd", "--tier", "B"], "--algo"),
    (["--bytes", "1M", "--gpus", "9"], "--gpus"),
])
def test_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str],
                                         key: str) -> None:
    code, out, err = _run(capsys, "--topology", "dgx-a100-80gb", *argv)
    assert code == 2
    assert out == ""
    assert err.startswith(f"simcluster: error: {key}: ")
    assert err.count("\n") == 1


def test_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "busbw.png"
    code, _, err = _run(capsys, "--topology", "dgx-a100-80gb", "--bytes", "1K:1M", "--plot", str(target))
    if importlib.util.find_spec("matplotlib") is None:
        assert code == 2
        assert "pip install 'simcluster[plots]'" in err
    else:
        assert code == 0
        assert target.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("topology", "nodes"), [("dgx-h100", 100_000), ("dgx-2", 513)])
def test_tier_b_refuses_a_cluster_beyond_its_limit_up_front(
        capsys: pytest.CaptureFixture[str], topology: str, nodes: int) -> None:
    from simcluster.cli_collective import MAX_TIER_B_GPUS

    code, out, err = _run(capsys, "--topology", topology, "--nodes", str(nodes), "--bytes", "1M",
                          "--tier", "B")
    assert code == 2
    assert out == ""
    assert err.startswith(f"simcluster: error: --nodes: {nodes} nodes are ")
    assert f"Tier B handles at most {MAX_TIER_B_GPUS} GPUs" in err
    assert err.rstrip().endswith("use --tier A")
    assert err.count("\n") == 1


def test_tier_b_runs_at_its_limit_and_tier_a_beyond_it(capsys: pytest.CaptureFixture[str]) -> None:
    from simcluster.cli_collective import MAX_TIER_B_GPUS, check_tier_b

    check_tier_b(MAX_TIER_B_GPUS // 8, 8)  # exactly at the limit: accepted
    with pytest.raises(SpecError, match="--nodes"):
        check_tier_b(MAX_TIER_B_GPUS // 8 + 1, 8)
    code, out, _ = _run(capsys, "--topology", "dgx-h100", "--nodes", "100000", "--bytes", "1M",
                        "--json")
    assert code == 0
    assert json.loads(out)["gpus"] == 800_000


def test_a_plot_file_that_is_not_a_figure_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 item 8: ``--plot x.txt`` was a matplotlib traceback; now refused before running."""
    assert cli.main(["collective", "--topology", "dgx-a100-80gb", "--nodes", "1", "--op",
                 "all_reduce", "--bytes", "1K", "--plot", "x.txt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simcluster: error: --plot: x.txt: expected a figure file ending in .png")
    assert err.count("\n") == 1
