"""Rerun issue 15's surviving-mutant check: apply each mutation in a temporary copy, run its test.

Usage: ``python tests/mutants.py [--only N]`` from the repository root. Each mutant (listed in
tests/MUTANTS.md) is one text replacement in one file; the copy's package is put first on
``PYTHONPATH`` so the test imports the mutated code. A mutant is *killed* when its test fails.
The script also runs each test on the unmutated copy, which must pass. Not collected by pytest
(no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
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
)


def _copy(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache",
                                    ".pytest_cache", ".hypothesis", "*.egg-info")
    for name in ("simcluster", "tests", "scenarios", "topologies", "docs", "analysis", "benchmarks",
                 "pyproject.toml", "README.md"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)


def _passes(copy: Path, test: str) -> bool:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    cmd = [sys.executable, "-m", "pytest", test, "-q", "-x", "-p", "no:cacheprovider"]
    return subprocess.run(cmd, cwd=copy, env=env, capture_output=True).returncode == 0


def check(m: Mutant) -> str:
    """``killed``, ``survived`` or ``broken`` (the test fails without the mutation)."""
    with tempfile.TemporaryDirectory(prefix="simcluster-mutant-") as tmp:
        copy = Path(tmp)
        _copy(copy)
        if not _passes(copy, m.test):
            return "broken"
        target = copy / m.path
        text = target.read_text()
        if text.count(m.original) != 1:
            return "stale (original text not found exactly once)"
        target.write_text(text.replace(m.original, m.mutated))
        return "survived" if _passes(copy, m.test) else "killed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, help="check mutant N only (1-based)")
    args = parser.parse_args(argv)
    chosen = [(args.only, MUTANTS[args.only - 1])] if args.only else enumerate(MUTANTS, 1)
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
