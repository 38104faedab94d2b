"""The ``validation`` block of every prediction (simcluster.run.validation, issue 24 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.cli import main
from simcluster.report.validation import validation_short, validation_text
from simcluster.run.validation import KEYS, WEIGHTS, block_for, coverage, setting, validation_block
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "scenarios" / "plan-10b-300b.yaml"
COVERED = {tuple(e[k] for k in KEYS) for e in coverage()}


def _key(accelerator: str, arch: str, stack: str, precision: str, family: str,
         sharding: str) -> dict[str, str]:
    return {"accelerator": accelerator, "arch": arch, "stack": stack, "precision": precision,
            "family": family, "sharding": sharding}


def test_a_covered_setting_carries_its_sources_oracle() -> None:
    (entry,) = [e for e in coverage() if e["source"] == "vtrain"]
    block = block_for({k: entry[k] for k in (*KEYS, "arch")}, "g")
    assert block["status"] == "validated"
    assert block["nearest"] is None
    assert block["sources"] == [{"source": "vtrain", "rows": entry["rows"],
                                 "median_abs_error": entry["median_abs_error"],
                                 "p90_abs_error": entry["p90_abs_error"],
                                 "mean_error": entry["mean_error"]}]
    assert validation_short(block) == f"vtrain {entry['median_abs_error']:.1%}"
    assert validation_text(block).startswith("validated for a100-sxm-40gb x deepspeed-megatron-2022")


def test_consumer_gpus_are_not_validated_and_say_what_their_gemms_rest_on() -> None:
    block = validation_block(load_scenario(str(PLAN)))
    assert block["status"] == "not validated"
    assert block["setting"]["accelerator"] == "rtx-3090-ti"
    near = block["nearest"]["setting"]
    assert near["precision"] == "bf16"  # nearest: same architecture (Ampere) and precision
    assert near["accelerator"].startswith("a100")
    assert "no tile model" in block["gemm"]
    assert validation_short(block) == "no"
    assert "NOT VALIDATED" in validation_text(block)


def test_the_setting_of_a_scenario() -> None:
    key = setting(load_scenario(str(PLAN)))
    assert key == _key("rtx-3090-ti", "ampere", "-", "bf16", "dense", "replicated")


_ENTRIES = coverage()


@given(st.sampled_from([e["accelerator"] for e in _ENTRIES] + ["rtx-4090", "mi300x"]),
       st.sampled_from(["ampere", "hopper", "blackwell", "-"]),
       st.sampled_from([e["stack"] for e in _ENTRIES] + ["-"]),
       st.sampled_from(["bf16", "fp16", "fp8", "mxfp8", "nvfp4"]),
       st.sampled_from(["dense", "moe"]), st.sampled_from(["zero3", "replicated"]))
def test_validated_iff_covered_and_the_nearest_is_the_closest(
        accelerator: str, arch: str, stack: str, precision: str, family: str,
        sharding: str) -> None:
    key = _key(accelerator, arch, stack, precision, family, sharding)
    block = block_for(key, "g")
    covered = tuple(key[k] for k in KEYS) in COVERED
    assert (block["status"] == "validated") == covered
    if covered:
        assert block["sources"]
        return
    near = block["nearest"]
    assert tuple(near["setting"][k] for k in KEYS) in COVERED
    score = sum(w for k, w in WEIGHTS.items()
                if next(e for e in _ENTRIES if all(e[j] == near["setting"][j] for j in KEYS))[k]
                == key[k])
    assert all(score >= sum(w for k, w in WEIGHTS.items() if e[k] == key[k]) for e in _ENTRIES)


def test_run_prints_the_validation_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--fast", str(PLAN)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("validation ")]
    assert "NOT VALIDATED for rtx-3090-ti" in line


def test_validate_coverage_prints_every_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--coverage"]) == 0
    out = capsys.readouterr().out
    for e in coverage():
        assert any(all(str(e[k]) in ln for k in ("accelerator", "stack", "source")) and
                   f"{e['median_abs_error']:.1%}" in ln for ln in out.splitlines())


def test_validate_without_a_scenario_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 2
    assert capsys.readouterr().err.strip() == (
        "simcluster: error: validate: expected a scenario YAML file, or --coverage")
