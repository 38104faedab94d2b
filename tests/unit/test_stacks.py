"""Software-stack presets (``execution: {stack: NAME}``): flags, refinement, errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simcluster import catalog
from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.spec import ExecutionSpec, load_scenario
from tests.validation import megatron_v1, sc21, torchtitan, vtrain

DEFAULT = Path(__file__).resolve().parents[2] / "scenarios" / "default.yaml"
#: The memory environment (CUDA context, NCCL_BUFFSIZE, allocator) belongs to the machine and its
#: settings, not to the framework: stacks leave it at its defaults.
ENVIRONMENT = {"cuda_context_bytes", "nccl_buffsize_bytes", "allocator_fragmentation"}
#: ``flash_attention`` is the older spelling of ``attention`` (derived from it): stacks name the kernel.
FLAGS = {f.name for f in dataclasses.fields(ExecutionSpec)} - {"stack", "flash_attention"} - ENVIRONMENT


def _field(key: str) -> str:
    """The field a YAML key sets (``host_op_us`` -> ``host_op_s``, in SI)."""
    return key[: -len("_us")] + "_s" if key.endswith("_us") else key


@pytest.mark.parametrize("name", catalog.names("stacks"))
def test_every_stack_loads_with_exactly_its_flags(name: str) -> None:
    entry = catalog.entry("stacks", name)
    flags = {_field(k): v * 1e-6 if k.endswith("_us") else v
             for k, v in entry["execution"].items()}
    assert set(flags) == FLAGS, "a stack states every execution flag (no silent defaults)"
    assert entry["description"]
    assert isinstance(entry["not_modelled"], list)
    s = load_scenario(DEFAULT, [f"execution={name}"])
    assert s.execution.stack == name
    assert {k: getattr(s.execution, k) for k in FLAGS} == pytest.approx(flags)


def test_keys_given_with_a_stack_refine_it(tmp_path: Path) -> None:
    s = load_scenario(DEFAULT, ["execution={stack: megatron-2021, flash_attention: true}"])
    assert (s.execution.stack, s.execution.flash_attention) == ("megatron-2021", True)
    assert s.execution.attention == "auto"  # the stack's kernel is math: true picks auto
    assert s.execution.grad_accumulation_fusion is False  # from the stack
    path = tmp_path / "s.yaml"
    path.write_text(DEFAULT.read_text() + "\nexecution: fsdp2-eager\n", encoding="utf-8")
    refined = load_scenario(path, ["execution.zero3_prefetch=false"])
    assert (refined.execution.stack, refined.execution.zero3_prefetch) == ("fsdp2-eager", False)
    assert refined.execution.flash_attention is True
    assert refined.execution.attention == "sdpa-flash"  # the stack's kernel


def test_flash_attention_is_the_older_spelling_of_attention() -> None:
    """``flash_attention: false`` on any stack means the unfused path; ``true`` keeps the stack's
    fused kernel; the two keys given together must agree."""
    off = load_scenario(DEFAULT, ["execution={stack: megatron-core-2024, flash_attention: false}"])
    assert (off.execution.attention, off.execution.flash_attention) == ("math", False)
    on = load_scenario(DEFAULT, ["execution={stack: megatron-core-2024, flash_attention: true}"])
    assert on.execution.attention == "cudnn"
    plain = load_scenario(DEFAULT, ["execution={flash_attention: false}"])
    assert plain.execution.attention == "math"
    kernel = load_scenario(DEFAULT, ["execution={attention: flash3}"])
    assert kernel.execution.flash_attention is True
    with pytest.raises(SpecError) as err:
        load_scenario(DEFAULT, ["execution={attention: cudnn, flash_attention: false}"])
    assert err.value.key == "execution.flash_attention"
    assert "contradicts attention: cudnn" in err.value.message


def test_unknown_stack_names_the_key_and_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpecError) as err:
        load_scenario(DEFAULT, ["execution.stack=megatron-2020"])
    assert err.value.key == "execution.stack"
    assert "did you mean megatron-2022, megatron-2021" in err.value.message
    assert main(["catalog", "stacks"]) == 0
    assert "megatron-core-2024" in capsys.readouterr().out


def test_validation_cases_use_the_stack_their_source_documents() -> None:
    assert sc21.scenario(sc21.CASES[0]).execution.stack == "megatron-2021"
    assert megatron_v1.scenario(megatron_v1.CASES[0]).execution.stack == "megatron-2021"
    assert torchtitan.scenario(torchtitan.CASES[0]).execution.stack == "fsdp2-eager"
    assert vtrain.scenario(vtrain.load_rows()[0]).execution.stack == "deepspeed-megatron-2022"
