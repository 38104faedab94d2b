"""The command line: output, exit status 2 with one line for bad input, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcluster import yamlio
from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = str(ROOT / "scenarios" / "default.yaml")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_prints_resolved_yaml_that_loads_back(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "validate", DEFAULT)
    assert code == 0
    resolved = yamlio.load(out)
    assert resolved["parallelism"]["dp"] == 4
    assert load_scenario(resolved) == load_scenario(DEFAULT)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parallelism: {tp: 2, pp: 2, global_batch: 256, micro_batchs: 1}",
         "parallelism.micro_batchs: unknown key (did you mean 'micro_batch'?)"),
        ("parallelism: {tp: 5, pp: 2, global_batch: 256}", "parallelism.tp: 5 does not divide heads=32"),
        ("parallelism: {tp: 2, pp: 2, global_batch: 256}\n"
         "checkpoint: {storage_write_GiB: 10}", "checkpoint.storage_write_GiB: wrong or missing unit"),
        ("parallelism: {tp: 2, pp: 2, global_batch: 256}\n"
         "checkpoint: {storage_write_GBps: -10}", "checkpoint.storage_write_GBps: must be > 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                         text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"model: llama-3-8b\ncluster: {{topology: dgx-h100, nodes: 2}}\n{text}\n")
    code, out, err = _run(capsys, "validate", str(path))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"{path}: {expected}" in err
    assert "Traceback" not in err


def test_set_errors_name_set(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "validate", DEFAULT, "--set", "parallelism.tp=3")
    assert code == 2
    assert err.startswith("simcluster: error: --set: parallelism.tp: 3 does not divide heads=32")


def test_missing_scenario_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "validate", str(tmp_path / "none.yaml"))
    assert code == 2
    assert "cannot read" in err


def test_topology_show_dgx_h100_128_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "topology", "show", "dgx-h100", "--nodes", "128", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["gpus"] == 1024
    assert summary["scale_up_Bps_per_gpu"] == 450e9     # NVLink4: 18 links x 25 GB/s
    assert summary["scale_out_Bps_per_gpu"] == 50e9     # one 400 Gb/s NIC per GPU
    assert summary["bisection_Bps"] == pytest.approx(1024 * 50e9 / 2)


def test_topology_show_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "topology", "show", "dgx-h100", "--nodes", "128")
    assert code == 0
    assert "1024 GPUs" in out
    assert "450 GB/s per GPU" in out


def test_topology_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "topology", "show", "dgx-h10")
    assert code == 2
    assert "unknown topology preset 'dgx-h10' (did you mean dgx-h100" in err


def test_topology_dot_to_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "g.dot"
    code, _, _ = _run(capsys, "topology", "show", "box-2x3090ti-nvlink", "--dot", str(target))
    assert code == 0
    assert target.read_text().startswith("graph")


def test_catalog_lists_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "catalog")
    assert code == 0
    for name in ("h100-sxm", "llama-3-405b", "dgx-b200", "box-4x3090ti-nvlink", "triton-flash",
                 "rsc1"):
        assert name in out


def test_catalog_reliability_gives_each_preset_s_mttf(capsys: pytest.CaptureFixture[str]) -> None:
    """rsc1: 6.5 per 1,000 node-days, 1.2% lemons at 226x: 47.1 days at one node (no fabric
    failures), 7.8 h at 128."""
    code, out, _ = _run(capsys, "catalog", "reliability")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:] if line.strip()}
    assert rows["rsc1"][1:6] == ["6.5", "0.012", "226", "47.1", "7.8"]


def test_catalog_attention_lists_each_kernel_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Every kernel with its published rates per architecture (FA3 on H100: 521 / 616 TFLOP/s
    forward at 2k / 16k, head dim 128, causal) and how each table was completed."""
    code, out, _ = _run(capsys, "catalog", "attention")
    assert code == 0
    rows = {tuple(line.split()[:2]): line for line in out.splitlines()[3:] if line.strip()}
    assert rows[("flash3", "hopper")].split()[2:4] == ["521", "616"]
    assert "alias" in rows[("sdpa-flash", "ampere")]
    assert ("flash3", "ampere") not in rows
    assert "priced op by op" in rows[("math", "any")]


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "validate" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [[], ["--dot"], ["--json"]])
def test_topology_show_refuses_a_cluster_beyond_its_limit_up_front(
        capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    from simcluster.cli_topology import MAX_DOT_GPUS, MAX_SUMMARY_GPUS

    code, out, err = _run(capsys, "topology", "show", "dgx-h100", "--nodes", "10000", *extra)
    limit = MAX_DOT_GPUS if "--dot" in extra else MAX_SUMMARY_GPUS
    assert code == 2
    assert out == ""
    assert err == (f"simcluster: error: --nodes: 10000 nodes are 80000 GPUs; topology show"
                   f"{' --dot' if extra == ['--dot'] else ''} handles at most {limit} GPUs "
                   f"({limit // 8} nodes of this topology)\n")


def test_topology_show_limit_counts_gpus_not_nodes() -> None:
    from simcluster.cli_topology import MAX_SUMMARY_GPUS, check_size

    check_size(MAX_SUMMARY_GPUS // 16, 16, dot=False)  # at the limit: accepted
    with pytest.raises(SpecError, match="--nodes: 1025 nodes are 16400 GPUs"):
        check_size(MAX_SUMMARY_GPUS // 16 + 1, 16, dot=False)


def test_run_with_the_issue_11_global_batch_ends_and_matches_the_closed_form(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``global_batch`` 4,194,304 on the default scenario took 95 s before the DES extrapolated its
    steady state; now it runs (no time assert here: benchmarks/bench_eval.py times it), and the DES
    step agrees with the analytical engine as closely as at the default batch."""
    steps = {}
    for flags in ((), ("--fast",)):
        assert main(["run", DEFAULT, "--json", "--set", "parallelism.global_batch=4194304",
                     *flags]) == 0
        steps[flags] = json.loads(capsys.readouterr().out)["iteration_time_s"]
    assert steps[()] == pytest.approx(steps[("--fast",)], rel=0.02)
    assert main(["run", DEFAULT, "--set", "parallelism.global_batch=1e40"]) == 2
    assert "parallelism.global_batch" in capsys.readouterr().err


def test_a_file_over_the_size_limit_is_refused_before_parsing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 item 5: a 23 MB YAML took 57 s and 1.15 GB before; now one line at once."""
    from simcluster.catalog import MAX_FILE_BYTES

    big = tmp_path / "big.yaml"
    big.write_text("name: x\n# " + "a" * MAX_FILE_BYTES + "\n")
    code, _, err = _run(capsys, "run", str(big))
    assert code == 2
    assert err.strip() == (f"simcluster: error: {big}: {big.stat().st_size:,} bytes; a scenario or "
                           f"topology file is at most {MAX_FILE_BYTES:,} bytes (the largest "
                           "shipped is a few kB)")


def test_an_absurd_token_count_prints_a_readable_number(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 item 8: training.tokens=1e300 printed a 300-digit day count."""
    code, out, _ = _run(capsys, "run", DEFAULT, "--fast", "--set", "training.tokens=1e300")
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("time to train")]
    assert len(line) < 120
    assert "e+" in line


def test_catalog_fits_a_wide_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 item 8: the catalog was 271 columns wide; long text columns wrap now."""
    code, out, _ = _run(capsys, "catalog")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 140


def test_wrapped_table_columns_oracle() -> None:
    from simcluster.report.table import format_table

    text = format_table(["a", "text", "n"], [["x", "one two three", 1.5]], wrap={1: 7})
    assert text.splitlines() == ["a  text       n", "-  -------  ---", "x  one two  1.5",
                                 "   three"]


def test_topology_show_says_what_it_does_on_large_clusters(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 8: a cluster of PROGRESS_GPUS or more (4,096; seconds of graph and max-flow)
    gets one stderr line first; a small one prints nothing there."""
    from simcluster import cli_topology

    code, _, err = _run(capsys, "topology", "show", "dgx-h100", "--nodes", "2")
    assert code == 0
    assert err == ""
    monkeypatch.setattr(cli_topology, "PROGRESS_GPUS", 16)
    code, _, err = _run(capsys, "topology", "show", "dgx-h100", "--nodes", "2")
    assert code == 0
    assert err.startswith("topology show: building the link graph of 16 GPUs")


def test_trace_to_an_unwritable_path_names_the_flag(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """--trace into a directory: exit 2 and one line naming --trace and the path, no traceback."""
    code, _, err = _run(capsys, "run", DEFAULT, "--trace", str(tmp_path))
    assert code == 2
    assert err.startswith("simcluster: error: --trace: cannot write ")
    assert str(tmp_path) in err
    assert "Traceback" not in err
