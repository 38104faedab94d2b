"""The analysis scripts never print a traceback: a missing input or matplotlib exits 2, one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parents[2] / "analysis"


def _script(tmp_path: Path, script: str, *args: str, block: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``analysis/<script>`` as ``__main__`` in an empty cwd, with ``block`` not importable."""
    code = ("import runpy, sys\n"
            f"sys.path.insert(0, {str(ANALYSIS)!r})\n"
            f"{f'sys.modules[{block!r}] = None' if block else ''}\n"
            f"sys.argv = [{script!r}, *{list(args)!r}]\n"
            f"runpy.run_path({str(ANALYSIS / script)!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)


@pytest.mark.parametrize("script", ["fit_collectives.py", "fit_matmul.py"])
def test_missing_input_file_is_one_line_and_exit_2(tmp_path: Path, script: str) -> None:
    done = _script(tmp_path, script, "measurements.yaml")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr == f"{script}: measurements.yaml: not found (pass the path to the measurements file)\n"


def test_fit_collectives_without_the_sweep_entry_exits_2(tmp_path: Path) -> None:
    (tmp_path / "measurements.yaml").write_text("collective_communication: []\n")
    done = _script(tmp_path, "fit_collectives.py", "measurements.yaml")
    assert done.returncode == 2
    assert done.stderr.startswith("fit_collectives.py: measurements.yaml: no entry ")
    assert done.stderr.count("\n") == 1


def test_plot_without_matplotlib_says_so_before_the_sweep(tmp_path: Path) -> None:
    done = _script(tmp_path, "plot_goodput_interval.py", "--out", str(tmp_path / "x.png"),
                   block="matplotlib")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr == ("plot_goodput_interval.py: needs the Python package matplotlib "
                           "(pip install 'simcluster[plots]')\n")
    assert done.stdout == ""  # refused before running the sweep


def test_unreadable_input_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "measurements.yaml").write_text("single_gpu_kernels: []\n")
    (tmp_path / "measurements.yaml").chmod(0)
    done = _script(tmp_path, "fit_matmul.py", "measurements.yaml")
    if done.returncode == 0:  # running as root: the file is readable anyway
        pytest.skip("permissions not enforced for this user")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_the_validation_scatter_reads_every_llama3_row() -> None:
    """plot_validation.py takes its Llama 3 rows from the test module, where a row may carry marks
    (``pytest.param``): every row becomes a point with the published value it states."""
    sys.path.insert(0, str(ANALYSIS))
    try:
        import plot_validation

        from tests.validation.test_llama3_throughput import ROWS
    finally:
        sys.path.remove(str(ANALYSIS))
    points = plot_validation.llama3_points()
    assert [p["published"] for p in points] == [getattr(r, "values", r)[2] for r in ROWS]
    assert all(p["predicted"] > 0 for p in points)
