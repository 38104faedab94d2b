"""The model presets NVIDIA's performance tables need, and the mapping of those tables' rows.

Presets (simcluster/catalog/models.yaml, each entry's comment cites its source): llama-2-13b,
gpt3-5b, gpt3-20b, nemotron-8b, nemotron-22b, nemotron-4-340b. Oracles:

* published parameter counts: Nemotron-4 340B technical report (arXiv 2406.11704) Table 1, 9.4B
  embedding + 331.6B non-embedding parameters; Llama 2 13B, 13,015,864,320 (the HF checkpoint
  meta-llama/Llama-2-13b-hf);
* NVIDIA's own FLOPs accounting of its NeMo 24.07 table (tests/validation/data): every row prints
  tokens/s and model TFLOP/s per GPU, whose ratio is NeMo's FLOPs per token (NVIDIA/NeMo @19fadb67
  nemo/utils/flops_formulas.py, vocabularies from LLM_VOCAB_SIZE_MAP). The formula evaluated on
  each preset's layers, hidden, heads, KV heads, FFN and sequence must give the printed ratio: the
  shape NVIDIA ran is the preset's (the names "5B", "8B", "22B" are labels, not counts).

The row mapping (tests/validation/nvidia.py) is checked without simulating: every one of the 328
rows is mapped or listed unexpressible with a reason, and every mapped scenario loads (or is
refused only for its precision, until a low-precision format is implemented).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from simcluster import catalog
from simcluster.errors import SpecError
from simcluster.perf.params import count_params
from simcluster.spec import load_scenario, schema
from simcluster.spec.model import ModelSpec
from tests.validation import nvidia

NEW = ("llama-2-13b", "gpt3-5b", "gpt3-20b", "nemotron-8b", "nemotron-22b", "nemotron-4-340b")


def _model(name: str) -> ModelSpec:
    return schema.parse(ModelSpec, catalog.entry("models", name), name)


def _embedding_params(m: ModelSpec) -> int:
    """Input embedding plus the untied output layer."""
    return m.vocab * m.hidden * (1 if m.tied_embeddings else 2)


@pytest.mark.parametrize("name", NEW)
def test_new_presets_load_in_a_scenario(name: str) -> None:
    s = load_scenario({"model": name, "cluster": {"topology": "dgx-h100", "nodes": 1},
                       "parallelism": {"tp": 1, "pp": 1, "global_batch": 8}})
    assert s.model.name == name


def test_nemotron_4_340b_has_the_technical_reports_parameters() -> None:
    m = _model("nemotron-4-340b")
    total = count_params(m).total
    assert total == pytest.approx(341.0e9, rel=0.01)
    assert total - _embedding_params(m) == pytest.approx(331.6e9, rel=0.001)
    assert _embedding_params(m) == pytest.approx(9.4e9, rel=0.01)


def test_llama_2_13b_has_the_checkpoints_parameters() -> None:
    assert count_params(_model("llama-2-13b")).total == 13_015_864_320


def test_nemotron_presets_are_non_gated_mlps_without_biases() -> None:
    """Squared ReLU: two matrices, no gate (ffn_act gelu); no linear biases, no dropout."""
    for name in ("nemotron-8b", "nemotron-22b", "nemotron-4-340b"):
        m = _model(name)
        assert (m.ffn_act, m.bias, m.dropout, m.tied_embeddings) == ("gelu", False, False, False)
        assert count_params(m).per_layer_mlp == 2 * m.hidden * m.ffn_hidden


def _nemo_flops_per_token(m: ModelSpec, family: str) -> float:
    """NeMo's formulas (flops_formulas.py @19fadb67: gpt3, llama2/llama3, nemotron), per token."""
    L, h, s = m.layers, m.hidden, m.seq_len
    vocab = {"gpt3": 51200, "llama2": 32000, "llama3": 128256, "nemotron": 256000}[family]
    if family == "gpt3":
        return (24 * h * h + 4 * s * h) * 3 * L + 6 * h * vocab
    ffn = 12 if family == "nemotron" else 18
    return L * h * h * (12 + 12 * m.kv_heads / m.heads + ffn * m.ffn_hidden / h + 12 * s / h
                        + 6 * vocab / (L * h))


FAMILY = {"gpt3-5b": "gpt3", "gpt3-20b": "gpt3", "gpt3-175b": "gpt3", "llama-2-7b": "llama2",
          "llama-2-13b": "llama2", "llama-2-70b": "llama2", "llama-3-8b": "llama3",
          "llama-3-70b": "llama3", "nemotron-8b": "nemotron", "nemotron-22b": "nemotron",
          "nemotron-4-340b": "nemotron"}


def test_nemo_2407_rows_ran_the_presets_shapes() -> None:
    rows = [r for section, r in nvidia.load_rows() if section == nvidia.NEMO_2407
            and r["task"] == "pretrain"]
    assert len(rows) == 12
    for row in rows:
        name = nvidia.MODELS[row["model"]["name"]]
        m = _model(name)
        assert m.seq_len == row["model"]["seq_len"], name
        printed = row["measured"]["tflops_per_gpu"] * 1e12 / row["measured"]["tokens_per_s_per_gpu"]
        # the table rounds TFLOP/s to integers (0.07% at 686) and tokens/s to integers
        assert _nemo_flops_per_token(m, FAMILY[name]) == pytest.approx(printed, rel=0.002), name


def test_long_sequence_conversion_is_nemos_formula() -> None:
    """NeMo 24.07's Llama 2 7B row: 780 TFLOP/s at 16,934 tokens/s per GPU, 4k tokens."""
    assert nvidia.nemo_flops_per_token("llama-2-7b", 4096) == pytest.approx(780e12 / 16934,
                                                                             rel=0.002)


# ------------------------------------------------------------------------------- row mapping

def test_every_row_is_mapped_or_has_a_reason() -> None:
    cases, left = nvidia.mapped_rows()
    ids = [c.id for c in cases] + [u.id for u in left]
    assert len(ids) == len(set(ids)) == 328
    assert all(u.reason for u in left)
    assert Counter(c.subset for c in cases) == {nvidia.SUBSET_H100: 25,
                                                nvidia.SUBSET_BLACKWELL: 76,
                                                nvidia.SUBSET_LONG: 17,
                                                nvidia.SUBSET_MOE: 54}
    dense = {c.model for c in cases}
    assert set(NEW) <= dense


def test_mapped_scenarios_load_or_are_refused_for_their_precision_only() -> None:
    cases, _ = nvidia.mapped_rows()
    refused = {}
    for case in cases:
        if case.pending is not None:
            continue
        try:
            s = nvidia.scenario(case)
        except SpecError as err:
            refused[case.id] = err.key
            continue
        assert s.cluster.gpus == case.gpus, case.id
        assert s.parallelism.dp * s.parallelism.tp * s.parallelism.pp * s.parallelism.cp \
            == case.gpus, case.id
    assert set(refused.values()) <= {"precision", "execution.fp8_recipe"}, refused


@pytest.mark.parametrize(("label", "system", "expected"), [
    ("FP8", "DGX-GB200", ("fp8", "current")),
    ("FP8-CS", "DGX-H100", ("fp8", "current")),
    ("fp8", "DGX-B200", ("fp8", "current")),
    ("fp8 [parenthesised variant: x]", "DGX-H100", ("fp8", "blockwise")),
    ("fp8 [parenthesised variant: x]", "DGX-GB200", ("mxfp8", None)),
    ("FP8-MX", "DGX-B200", ("mxfp8", None)),
    ("MXFP8", "DGX-GB300", ("mxfp8", None)),
    ("NVFP4", "DGX-GB300", ("nvfp4", None)),
    ("BF16", "DGX-H100", ("bf16", None)),
])
def test_megatron_bridge_labels(label: str, system: str, expected: tuple[str, str | None]) -> None:
    row = {"id": "x", "parallelism": {"precision": label}, "hardware": {"gpu": f"NVIDIA ({system})"}}
    assert nvidia.precision_of(nvidia.MEGATRON_BRIDGE, row) == expected


def test_nemo_tables_are_delayed_scaling() -> None:
    row = {"id": "x", "parallelism": {"precision": "fp8"}, "hardware": {"gpu": "(DGX-H100)"}}
    assert nvidia.precision_of(nvidia.NEMO_2407, row) == ("fp8", "delayed")
    assert nvidia.precision_of(nvidia.LONG_SEQUENCE, row) == ("fp8", "delayed")


@pytest.mark.parametrize("chunks", [32, 64, 128])
def test_405b_stages_count_the_embedding_and_the_loss(chunks: int) -> None:
    stages = nvidia.stage_layers_with_embedding_and_loss(126, chunks)
    assert len(stages) == chunks
    assert sum(stages) == 126
    assert stages[0] == stages[-1] == stages[1] - 1


def test_no_file_of_the_harness_names_a_path_outside_the_repository() -> None:
    validation = Path(nvidia.__file__).resolve().parent
    script = validation.parents[1] / "analysis" / "validate_nvidia.py"
    for path in (Path(nvidia.__file__), nvidia.DATA, validation / "data" / "nvidia_stack_notes.md",
                 script):
        text = path.read_text(encoding="utf-8")
        assert "/work/" not in text, path.name
        assert "shared/calibration" not in text, path.name
