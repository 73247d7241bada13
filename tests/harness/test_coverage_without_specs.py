"""`conformance coverage` in a clone without the spec texts beside it
(issue 24): the stored tables are shown, and what needs the texts (--check,
--write, --format json) exits 2 saying how to point it at them."""

from __future__ import annotations


import pytest

from conformance.cli import main
from conformance.coverage import tool

REAL_SPECS = tool.DEFAULT_SPECS_DIR


@pytest.fixture
def no_specs(tmp_path, monkeypatch):
    """A checkout with nothing at <repo>/../shared/specs and no variable set."""
    monkeypatch.setattr(tool, "DEFAULT_SPECS_DIR", tmp_path / "shared" / "specs")
    monkeypatch.delenv(tool.SPECS_ENV, raising=False)
    return tmp_path / "shared" / "specs"


def test_without_the_texts_the_stored_table_is_shown(no_specs, capsys):
    assert main(["coverage", "--protocol", "btp"]) == 0
    out, err = capsys.readouterr()
    assert out == (tool.REPO / "docs" / "coverage" / "btp.md").read_text(encoding="utf-8")
    assert f"the spec texts are not at {no_specs}" in err and "docs/coverage/btp.md" in err
    assert "--specs-dir" in err and tool.SPECS_ENV in err


def test_every_stored_table_is_shown_when_no_protocol_is_named(no_specs, capsys):
    assert main(["coverage"]) == 0
    out = capsys.readouterr().out
    for protocol in tool.protocols_with_tables():
        assert (tool.DOCS_DIR / f"{protocol}.md").read_text(encoding="utf-8").splitlines()[0] in out


def test_a_protocol_without_a_stored_table_is_an_error(no_specs, capsys):
    assert main(["coverage", "--protocol", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no stored table docs/coverage/nope.md" in err and "btp" in err


@pytest.mark.parametrize("option", [["--check"], ["--write", "out"], ["--format", "json"]])
def test_what_needs_the_texts_exits_2_with_the_fix(no_specs, capsys, option):
    assert main(["coverage", "--protocol", "btp", *option]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    needed_by = "--format json" if option[0] == "--format" else option[0]
    assert (
        f"the spec texts are not at {no_specs} (the default, <repo>/../shared/specs); {needed_by} needs them"
        in err
    )
    assert "pass --specs-dir DIR or set CONFORMANCE_SPECS_DIR=DIR" in err


def test_texts_named_but_missing_exit_2_naming_who_named_them(
    no_specs, tmp_path, monkeypatch, capsys
):
    assert main(["coverage", "--protocol", "btp", "--specs-dir", str(tmp_path / "absent")]) == 2
    assert f"not at {tmp_path / 'absent'} (--specs-dir)" in capsys.readouterr().err
    monkeypatch.setenv(tool.SPECS_ENV, str(tmp_path / "elsewhere"))
    assert main(["coverage", "--protocol", "btp"]) == 2
    assert f"not at {tmp_path / 'elsewhere'} ($CONFORMANCE_SPECS_DIR)" in capsys.readouterr().err


@pytest.mark.skipif(not REAL_SPECS.is_dir(), reason=f"the spec texts are not at {REAL_SPECS}")
@pytest.mark.parametrize("how", ["option", "env"])
def test_check_takes_the_texts_from_the_option_or_the_variable(no_specs, monkeypatch, capsys, how):
    args = ["coverage", "--protocol", "btp", "--check"]
    if how == "option":
        args += ["--specs-dir", str(REAL_SPECS)]
    else:
        monkeypatch.setenv(tool.SPECS_ENV, str(REAL_SPECS))
    assert main(args) == 0
    assert "btp: normative sentences" in capsys.readouterr().err
