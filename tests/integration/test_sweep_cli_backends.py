"""A real ``simcluster sweep``: -j 1, -j 2 and Ray write the same tables; a sweep killed with
SIGKILL and rerun with the same arguments skips its stored chunks and ends with the same table.

Slow (about 20 s: a local Ray starts, and the kill test sweeps a 10B model twice), still run in CI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIMCLUSTER = str(Path(sys.executable).with_name("simcluster"))
TEN_B = str(ROOT / "scenarios" / "gpt-10b-4x3090ti.yaml")
# About 10 chunks of the analytical pass, a few seconds in all.
SMALL = ["--search", "zero_stage=1,3", "--search", "recompute=full"]

pytestmark = pytest.mark.slow


def _sweep(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [SIMCLUSTER, "sweep", TEN_B, *SMALL, "--quiet", "--out", str(out), "--results", "csv",
           *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_jobs_and_ray_write_the_same_table(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    one = _sweep(tmp_path / "j1", "--rerank", "3")
    _sweep(tmp_path / "j2", "-j", "2", "--rerank", "3")
    on_ray = _sweep(tmp_path / "ray", "-j", "2", "--backend", "ray", "--rerank", "3")
    table = (tmp_path / "j1" / "results.csv").read_bytes()
    assert (tmp_path / "j2" / "results.csv").read_bytes() == table
    assert (tmp_path / "ray" / "results.csv").read_bytes() == table
    assert on_ray.stdout.split("took")[0] == one.stdout.split("took")[0]
    parts = list((tmp_path / "j1" / "parts").glob("chunk-*.parquet"))
    assert len(parts) >= 5  # the comparison spans several chunks
    assert table.count(b"\"des\"") == 3  # the DES pass ran (on the workers too) and is in the table


def test_killed_sweep_resumes_to_the_same_table(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    _sweep(whole)
    total = len(list((whole / "parts").glob("chunk-*.parquet")))
    out = tmp_path / "killed"
    cmd = [SIMCLUSTER, "sweep", TEN_B, *SMALL, "--quiet", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(list((out / "parts").glob("chunk-*.parquet"))) < 2:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = {p.name for p in (out / "parts").glob("chunk-*.parquet")}
    assert 2 <= len(stored) < total
    times = {name: (out / "parts" / name).stat().st_mtime_ns for name in stored}
    _sweep(out)
    assert (out / "results.csv").read_bytes() == (whole / "results.csv").read_bytes()
    assert all((out / "parts" / n).stat().st_mtime_ns == t for n, t in times.items()), \
        "a stored chunk was computed again"


def _children(pid: int) -> set[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_no_worker_outlives_its_sweep(tmp_path: Path, sig: signal.Signals) -> None:
    """Issue 24 item 5: SIGKILL (or SIGINT) to a background ``sweep -j 2`` alone, not its group,
    leaves no process behind: the workers die with their parent (PR_SET_PDEATHSIG)."""
    cmd = [SIMCLUSTER, "sweep", TEN_B, "-j", "2", "--quiet", "--out", str(tmp_path / "s")]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(workers := _children(proc.pid)) < 2:
        assert proc.poll() is None, "the sweep ended before its workers started"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # the workers are past their initializer
    workers = _children(proc.pid)
    os.kill(proc.pid, sig)
    # Liveness limits, not timings: generous, since the suite's other xdist worker shares the cores.
    proc.wait(timeout=120)
    deadline = time.monotonic() + 60
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)]
