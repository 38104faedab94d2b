"""Rerun issue 15's 32-mutant check: apply each mutation in a temporary copy, run the tests.

Usage, from the repository root: ``python tests/mutants.py [--only N]`` runs each mutant's named
test (which must pass on the unmutated copy); ``python tests/mutants.py --suite [--only N]
[--jobs J]`` runs the whole suite (``pytest -x``, ``CI=true``) on each, after the unmutated suite
passes and an import-breaking canary fails it. Each mutant (listed in tests/MUTANTS.md) is one text
replacement in one file; the copy's package is put first on ``PYTHONPATH`` so the tests import the
mutated code. A mutant is *killed* when a test fails. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORACLES = "tests/unit/test_mutant_oracles.py"


@dataclass(frozen=True)
class Mutant:
    """One one-line bug: ``original`` replaced by ``mutated`` in ``path``; ``test`` must fail."""

    path: str
    original: str
    mutated: str
    test: str


MUTANTS: tuple[Mutant, ...] = (
    Mutant("simcluster/perf/collectives_formulas.py",
           'return 1.0 if op == "all_reduce" else (n - 1) / (2 * n)',
           'return 1.0 if op == "all_reduce" else (n - 1) / n',
           f"{ORACLES}::test_nvls_all_gather_bus_bandwidth_is_n_minus_1_over_2n_of_all_reduce"),
    Mutant("simcluster/perf/memory.py",
           "par.dp * par.cp // par.ep, ex.fp32_grad_copy)",
           "par.dp * par.cp, ex.fp32_grad_copy)",
           f"{ORACLES}::test_mixtral_optimizer_state_shards_experts_over_dp_cp_over_ep"),
    Mutant("simcluster/horizon/sampling.py",
           "self.scale = 1.0 / (rate_s * math.gamma(1.0 + 1.0 / shape)) if rate_s > 0",
           "self.scale = 1.0 / rate_s if rate_s > 0",
           f"{ORACLES}::test_weibull_failure_count_matches_nodes_rate_horizon"),
    Mutant("simcluster/perf/reliability.py",
           "if checkpoint_s >= 2.0 * mtbf_s:",
           "if checkpoint_s >= mtbf_s:",
           f"{ORACLES}::test_daly_interval_between_m_and_2m_uses_the_formula"),
    Mutant("simcluster/perf/step.py",
           "overlap = st.backward_compute_s if overlapped else 0.0",
           "overlap = st.forward_compute_s if overlapped else 0.0",
           f"{ORACLES}::test_dp_reduction_hides_behind_the_last_backward_not_the_forward"),
    Mutant("simcluster/horizon/machine.py",
           "self.persist_req_p = min(self.persist_req_p, self.durable_p)\n",
           "pass\n",
           f"{ORACLES}::test_rollback_to_durable_restarts_the_persist_count_from_it"),
    Mutant("simcluster/perf/cost.py",
           "cost_usd=amortised_usd(cost, capital, time_s) + energy,",
           "cost_usd=capital + energy,",
           "tests/unit/test_cost_modes.py::test_buy_oracle"),
    Mutant("simcluster/perf/cost.py",
           "energy_kWh = nodes * node_power * cost.pue * time_s",
           "energy_kWh = nodes * node_power * time_s",
           "tests/unit/test_cost_modes.py::test_buy_oracle"),
    Mutant("simcluster/perf/cost.py",
           "return capital_usd * time_s / (cost.amortisation_years * SECONDS_PER_YEAR)",
           "return capital_usd * time_s / SECONDS_PER_YEAR",
           "tests/unit/test_cost_modes.py::test_buy_oracle"),
    Mutant("simcluster/perf/memory_stage.py",
           "total = (units - 1) * self.stored + self.working if units else 0.0",
           "total = units * self.stored + self.working if units else 0.0",
           f"{ORACLES}::test_full_recompute_middle_stage_keeps_inputs_and_one_working_layer"),
    Mutant("simcluster/perf/slowdown.py",  # shared by both engines since issue 15
           "group = par.tp * par.cp",
           "group = par.tp",
           f"{ORACLES}::test_slow_gpu_placement_counts_context_parallel_ranks"),
    Mutant("simcluster/sim/build.py",
           "fractions = [(k + 1) / count if overlap else 1.0 for k in range(count)]",
           "fractions = [k / count if overlap else 1.0 for k in range(count)]",
           f"{ORACLES}::test_dp_buckets_become_ready_evenly_through_the_releasing_op"),
    Mutant("simcluster/perf/collectives_formulas.py",  # both tiers' step table since issue 15
           "return 2 * (per_node - 1), 2 * _lg(nodes)",
           "return 2 * (per_node - 1), 2 * (nodes - 1)",
           f"{ORACLES}::test_tier_b_latency_steps_follow_nccl_tuning"),
    Mutant("simcluster/perf/collectives_formulas.py",
           "return 2 * (per_node - 1), 2 * _lg(nodes)",
           "return per_node - 1, 2 * _lg(nodes)",
           f"{ORACLES}::test_tier_b_latency_steps_follow_nccl_tuning"),
    Mutant("simcluster/cli.py",
           "    cli_collective.add_parser(sub)\n",
           "",
           "tests/unit/test_cli_collective.py"),
    # 16-32: chosen before any run, one per core-formula module in the order of the brief's list
    # (tests/MUTANTS.md "Selection rule"); the named test is the module's own unit-test file.
    Mutant("simcluster/perf/flops.py",
           "qkv_flops=2 * tokens * h * (q + 2 * kv),",
           "qkv_flops=2 * tokens * h * (q + kv),",
           "tests/unit/test_flops.py"),
    Mutant("simcluster/perf/pipeline.py",
           "return (p - 1) * (t_f + t_b) / v  # v = 1 except interleaved",
           "return (p - 1) * (t_f + t_b)  # v = 1 except interleaved",
           "tests/unit/test_pipeline.py"),
    Mutant("simcluster/perf/collectives_formulas.py",
           "return latency + passes * (n - 1) / n * size_bytes / bandwidth_Bps",
           "return latency + 2 * (n - 1) / n * size_bytes / bandwidth_Bps",
           "tests/unit/test_collectives.py"),
    Mutant("simcluster/perf/collectives.py",
           "return CollectiveTime(t, name, proto, algbw, algbw * bus_factor(op, group.n))",
           "return CollectiveTime(t, name, proto, algbw, algbw * bus_factor(op, group.nodes))",
           "tests/unit/test_collectives.py"),
    Mutant("simcluster/perf/kernels/gemm.py",
           "return max(2.0 * batch * mm * nn * kk / rate, memory_bound_time_s(acc, nbytes))",
           "return min(2.0 * batch * mm * nn * kk / rate, memory_bound_time_s(acc, nbytes))",
           "tests/unit/test_compute.py"),
    Mutant("simcluster/perf/memory.py",
           "optimizer=per_param.optimizer / (dp if zero_stage >= 1 else 1),  # P_os",
           "optimizer=per_param.optimizer / (dp if zero_stage >= 2 else 1),  # P_os",
           "tests/unit/test_memory.py"),
    Mutant("simcluster/perf/memory_stage.py",
           "return replicated + (sharded + scores) / tp",
           "return replicated + sharded + scores / tp",
           "tests/unit/test_memory.py"),
    Mutant("simcluster/perf/reliability.py",
           "return math.sqrt(2.0 * checkpoint_s * mtbf_s)",
           "return math.sqrt(checkpoint_s * mtbf_s)",
           "tests/unit/test_reliability_formulas.py"),
    Mutant("simcluster/horizon/sampling.py",
           "arr = last + np.cumsum(self.rng.standard_exponential(batch)) / self.rate_s",
           "arr = last + np.cumsum(self.rng.standard_exponential(batch)) * self.rate_s",
           # test_reliability_engine.py only blew up (over 4 GiB): the oracle fails cleanly
           f"{ORACLES}::test_poisson_source_draws_rate_times_horizon_events_in_chunks"),
    Mutant("simcluster/horizon/machine.py",
           "self._enter(Phase.RESTART, t, self.cfg.restart_s)",
           "self._enter(Phase.RESTART, t, self.cfg.warmup_s)",
           "tests/unit/test_reliability_engine.py"),
    Mutant("simcluster/perf/cost.py",
           "gpu_hours = gpus * time_s / 3600.0",
           "gpu_hours = nodes * time_s / 3600.0",
           "tests/unit/test_cost_modes.py"),
    Mutant("simcluster/perf/step.py",
           "return 2 * message * (par.micro_batches * par.virtual_stages + par.pp - 1)",
           "return 2 * message * (par.micro_batches * par.virtual_stages + par.pp)",
           # survived tests/unit/test_step.py (only the tutorial's text noticed): the oracle
           f"{ORACLES}::test_pipeline_sends_on_the_critical_path_count_mv_plus_p_minus_1_each_way"),
    Mutant("simcluster/flows/maxmin.py",
           "remaining[loaded] -= step * load[loaded]",
           "remaining[loaded] -= step",
           "tests/unit/test_flows_maxmin.py"),
    Mutant("simcluster/sim/schedules.py",
           "    warmup = min(p - stage - 1, m)\n    ops = [SchedOp(\"F\", 0, j) for j in range(warmup)]",
           "    warmup = min(p - stage, m)\n    ops = [SchedOp(\"F\", 0, j) for j in range(warmup)]",
           "tests/unit/test_sim_schedules.py"),
    Mutant("simcluster/perf/zero3.py",
           "return m * exposed, m * n * (2 * layer.gather_s + layer.scatter_s)",
           "return m * exposed, m * n * (layer.gather_s + layer.scatter_s)",
           "tests/unit/test_zero_sharding.py"),
    Mutant("simcluster/perf/tp_overlap.py",
           "return max(0.0, comm_s - gemm_s) + min(comm_s, gemm_s) / chunks",
           "return max(0.0, comm_s - gemm_s) + max(comm_s, gemm_s) / chunks",
           "tests/unit/test_tp_overlap.py"),
    Mutant("simcluster/perf/kernels/eager.py",
           "backward = max(backward_factor * memory_bound_time_s(acc, nbytes), floor)",
           "backward = max(memory_bound_time_s(acc, nbytes), floor)",
           "tests/unit/test_eager.py"),
)


def _copy(dest: Path, snapshot: Path | None = None) -> None:
    """Copy the working tree's files (tracked and untracked-not-ignored, as git lists them), or
    all of ``snapshot`` (such a copy made once at the start of a run) when given."""
    if snapshot is not None:
        shutil.copytree(snapshot, dest, dirs_exist_ok=True)
        return
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


#: A pytest plugin written into each suite-mode copy: it moves the tests of the files named in
#: ``MUTANT_FIRST`` to the front (stable otherwise). The same tests run; with ``-x`` the verdict
#: does not depend on the order, only how soon a killed mutant stops.
ORDER_PLUGIN = """
import os


def pytest_collection_modifyitems(session, config, items):
    first = set(filter(None, os.environ.get("MUTANT_FIRST", "").split(",")))
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in first)
"""


#: A mutant can make a loop endless or an array huge (an inverted rate draws events a million
#: times too dense): its pytest is stopped past these, and the mutant counts as killed ("stopped").
MAX_RSS_BYTES = 4 << 30
TIMEOUT_S = 1200.0


@dataclass(frozen=True)
class Ran:
    """One pytest run: exit status, stdout and stderr together, and why it was stopped ('')."""

    returncode: int
    output: str
    stopped: str


def _rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _watch(proc: subprocess.Popen[bytes]) -> str:
    """Wait for ``proc``; kill its process group past the memory or time limit and say why."""
    start = time.monotonic()
    while True:
        try:
            proc.wait(timeout=1.0)
            return ""
        except subprocess.TimeoutExpired:
            why = (f"stopped: over {MAX_RSS_BYTES >> 30} GiB" if _rss_bytes(proc.pid) > MAX_RSS_BYTES
                   else f"stopped: over {TIMEOUT_S:.0f} s" if time.monotonic() - start > TIMEOUT_S
                   else "")
            if why:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return why


def _pytest(copy: Path, args: list[str], first: str = "") -> Ran:
    """Run pytest in ``copy`` with the copy's package first on ``PYTHONPATH`` (before the
    editable install's path entry, which the venv's ``.pth`` file appends after it)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "CI": "true", "MUTANT_FIRST": first}
    plugin = ["-p", "_mutant_order"] if (copy / "_mutant_order.py").exists() else []
    cmd = [sys.executable, "-m", "pytest", *args, "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
           "-rfE", *plugin]  # -n 0: in one process, in the plugin's order
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        stopped = _watch(proc)
        out.seek(0)
        return Ran(proc.returncode, out.read().decode(errors="replace"), stopped)


def _passes(copy: Path, test: str) -> bool:
    return _pytest(copy, [test]).returncode == 0


def _apply(copy: Path, m: Mutant) -> bool:
    """Write the mutation into the copy; False when ``original`` is not there exactly once."""
    target = copy / m.path
    text = target.read_text()
    if text.count(m.original) != 1:
        return False
    target.write_text(text.replace(m.original, m.mutated))
    return True


def check(m: Mutant) -> str:
    """``killed``, ``survived`` or ``broken`` (the test fails without the mutation)."""
    with tempfile.TemporaryDirectory(prefix="simcluster-mutant-") as tmp:
        copy = Path(tmp)
        _copy(copy)
        if not _passes(copy, m.test):
            return "broken"
        if not _apply(copy, m):
            return "stale (original text not found exactly once)"
        return "survived" if _passes(copy, m.test) else "killed"


@dataclass(frozen=True)
class SuiteResult:
    """Whole-suite verdict of one mutant: ``killed`` / ``survived`` / ``stale``."""

    verdict: str
    seconds: float
    first_failure: str
    output: str  # the end of pytest's output


def _first_failure(output: str) -> str:
    """The first ``FAILED``/``ERROR`` node id of pytest's short summary ('' when none)."""
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split(" ", 1)[1]
    return ""


def run_suite(m: Mutant | None, snapshot: Path | None = None) -> SuiteResult:
    """Apply ``m`` (None: nothing) in a fresh copy and run the whole suite there (``-x``)."""
    with tempfile.TemporaryDirectory(prefix="simcluster-mutant-") as tmp:
        copy = Path(tmp)
        _copy(copy, snapshot)
        if m is not None and not _apply(copy, m):
            return SuiteResult("stale", 0.0, "", "")
        (copy / "_mutant_order.py").write_text(ORDER_PLUGIN)
        start = time.perf_counter()
        done = _pytest(copy, [], m.test.split("::")[0] if m is not None else "")
        seconds = time.perf_counter() - start
    tail = done.output[-4000:]
    if done.returncode == 0:
        return SuiteResult("survived", seconds, "", tail)
    first = done.stopped or _first_failure(done.output) or f"exit {done.returncode}"
    return SuiteResult("killed", seconds, first, tail)


#: Breaks every import of the package: the suite must fail on it, naming it, which proves the
#: copy (not the editable install of the checkout) is what the tests import.
CANARY = Mutant("simcluster/__init__.py", "from __future__ import annotations\n",
                'from __future__ import annotations\nraise ImportError("mutant canary")\n', "")


def _preflight(snapshot: Path) -> str:
    """'' when the unmutated suite passes and the canary is killed; else why the run must stop."""
    clean = run_suite(None, snapshot)
    print(f" 0 unmutated suite: {'passed' if clean.verdict == 'survived' else 'FAILED'} "
          f"({clean.seconds:.0f} s) {clean.first_failure}", flush=True)
    if clean.verdict != "survived":
        return "the unmutated suite fails: fix it before a mutation run"
    canary = run_suite(CANARY, snapshot)
    if canary.verdict != "killed" or "mutant canary" not in canary.output:
        return "the canary import error did not fail the suite: the copy is not what is imported"
    print(f" 0 canary import error: killed in {canary.seconds:.0f} s by {canary.first_failure} "
          "(the copy's package is the one imported)", flush=True)
    return ""


def _run_one(snapshot: Path, item: tuple[int, Mutant]) -> SuiteResult:
    n, m = item
    r = run_suite(m, snapshot)
    print(f"{n:2d} {r.verdict:8s} {r.seconds:5.0f} s {m.path} {r.first_failure}", flush=True)
    return r


def suite_main(chosen: list[tuple[int, Mutant]], jobs: int) -> int:
    """Whole-suite mode: preflight, then every chosen mutant; prints the table."""
    with tempfile.TemporaryDirectory(prefix="simcluster-snapshot-") as tmp:
        snapshot = Path(tmp)
        _copy(snapshot)  # the tree as it is now: later edits do not reach this run
        why = _preflight(snapshot)
        if why:
            print(f"aborted: {why}")
            return 2
        begin = time.perf_counter()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(functools.partial(_run_one, snapshot), chosen))
    print("| N | file | verdict | seconds | first failing test |")
    print("|---|---|---|---|---|")
    for (n, m), r in zip(chosen, results, strict=True):
        print(f"| {n} | {m.path} | {r.verdict} | {r.seconds:.0f} | {r.first_failure} |")
    killed = sum(r.verdict == "killed" for r in results)
    print(f"{killed}/{len(results)} killed; {time.perf_counter() - begin:.0f} s wall "
          f"({jobs} job(s)), whole suite each")
    return 0 if killed == len(results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, help="check mutant N only (1-based)")
    parser.add_argument("--suite", action="store_true",
                        help="run the whole test suite on each mutant instead of its named test")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once in --suite mode")
    args = parser.parse_args(argv)
    chosen = [(args.only, MUTANTS[args.only - 1])] if args.only else list(enumerate(MUTANTS, 1))
    if args.suite:
        return suite_main(chosen, max(1, args.jobs))
    killed = total = 0
    for n, m in chosen:
        verdict = check(m)
        total += 1
        killed += verdict == "killed"
        print(f"{n:2d} {verdict:9s} {m.path}: {m.original.strip()!r} -> {m.mutated.strip()!r}",
              flush=True)
    print(f"{killed}/{total} killed")
    return 0 if killed == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
