"""``--option 'NAME: KEY=V1,V2 ...'`` (issue 24 item 7): a hardware option added beside the file's,
its lists swept inside it alone (``--vary`` multiplies every option)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcluster.cli import main
from simcluster.errors import SpecError
from simcluster.sweep.config import FILE_OPTION, parse_option, settings_from

OPTIONS = [{"name": "a", "set": {"cluster.nodes": [1, 2]}},
           {"name": "b", "set": {"cluster.nodes": 4}}]


def test_parse_option_reads_yaml_values_and_lists() -> None:
    assert parse_option("2gpu: cluster.topology=box-2x3090ti-nvlink cluster.nodes=16,32 "
                        "cost=buy") == {
        "name": "2gpu", "set": {"cluster.topology": "box-2x3090ti-nvlink",
                                "cluster.nodes": [16, 32], "cost": "buy"}}


@pytest.mark.parametrize("text", ["no-colon cluster.nodes=2", ": cluster.nodes=2", "name:",
                                  "name: cluster.nodes", "name: cluster.nodes="])
def test_bad_option_text_names_the_flag(text: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_option(text)
    assert info.value.key == "--option"


def test_an_added_option_is_not_multiplied_by_the_others() -> None:
    """2 + 1 settings in the file, 3 more from the flag: 6, where --vary of the same three
    values would give (2 + 1) x 3 = 9."""
    settings = settings_from(OPTIONS, {}, "f.yaml", option_flags=("c: cluster.nodes=8,16,32",))
    assert [(s.option, s.overrides) for s in settings] == [
        ("a", ("cluster.nodes=1",)), ("a", ("cluster.nodes=2",)), ("b", ("cluster.nodes=4",)),
        ("c", ("cluster.nodes=8",)), ("c", ("cluster.nodes=16",)), ("c", ("cluster.nodes=32",))]
    varied = settings_from(OPTIONS, {}, "f.yaml", vary_flags=("cluster.nodes=8,16,32",))
    assert len(varied) == 9


def test_a_file_without_options_becomes_the_file_option() -> None:
    settings = settings_from(None, {}, "f.yaml", option_flags=("big: cluster.nodes=4",))
    assert [(s.option, s.overrides) for s in settings] == [
        (FILE_OPTION, ()), ("big", ("cluster.nodes=4",))]
    with pytest.raises(SpecError, match=r"sweep.options\[2\].name"):  # names stay unique
        settings_from(OPTIONS, {}, "f.yaml", option_flags=("a: cluster.nodes=4",))


def test_cli_option_adds_a_hardware_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sweep", "scenarios/default.yaml", "--layouts", "fixed", "--quiet",
            "--out", str(tmp_path / "o"), "--option", "two-nodes: cluster.nodes=2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "best per option" in out
    assert "two-nodes" in out
    assert f"\n{FILE_OPTION} " in out
    assert main([*args[:-1], "two-nodes"]) == 2
    assert "--option: expected 'NAME: KEY=V1,V2 KEY=V ...', got 'two-nodes'" in capsys.readouterr().err
