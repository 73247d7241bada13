"""What the README promises a new user (issue 24): the exit status table
matches the EXIT_ constants of every command, the CLI is run from .venv,
and the test tiers' table names what each tier installs."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from conformance import cli, report
from conformance.aggregate import cli as aggregate_cli
from conformance.coverage import tool as coverage_tool

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The first markdown table of ``text``: header cells and body rows."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]
    return split[0], [row for row in split[2:]]


def documented_statuses() -> dict[str, set[int]]:
    header, rows = table_rows(section("Exit status"))
    statuses = [int(cell) for cell in header[1:]]
    out = {}
    for row in rows:
        assert len(row) == len(header), (
            f"row with {len(row)} cells, header has {len(header)}: {row}"
        )
        for command in re.findall(r"`([a-z-]+)`", row[0]):
            out[command] = {status for status, cell in zip(statuses, row[1:]) if cell != "-"}
    return out


def exit_constants(module) -> set[int]:
    return {
        value
        for name, value in vars(module).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }


def test_every_command_has_a_row():
    commands = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert commands == set(documented_statuses()), (
        "README.md's exit status table and the CLI's commands differ"
    )


def test_certify_row_is_exactly_the_exit_constants_of_cli():
    assert documented_statuses()["certify"] == exit_constants(cli) == {0, 1, 2, 3, 4}


def test_the_other_rows_match_their_modules_constants():
    documented = documented_statuses()
    assert documented["report"] == exit_constants(report)
    for command in ("ingest", "compact", "matrix", "versions-view"):
        assert documented[command] == exit_constants(aggregate_cli)
    # coverage's own 0/1/2, and the harness error every command can end with.
    assert documented["coverage"] == exit_constants(coverage_tool) | {cli.EXIT_HARNESS_ERROR}
    for command, statuses in documented.items():
        assert statuses <= exit_constants(cli) | exit_constants(report) | exit_constants(
            aggregate_cli
        ), command
        assert {cli.EXIT_USAGE, cli.EXIT_HARNESS_ERROR} <= statuses, (
            f"{command}: every command can exit 2 and 3"
        )


def test_interrupt_statuses_are_documented():
    text = section("Exit status")
    assert f"130 on Ctrl-C and {128 + signal.SIGTERM} on SIGTERM" in text


def test_an_unexpected_exception_is_a_harness_error_not_a_verdict(monkeypatch, capsys):
    def broken(files):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cli, "load_targets", broken)
    assert cli.main(["targets"]) == cli.EXIT_HARNESS_ERROR
    err = capsys.readouterr().err
    assert "RuntimeError: a bug" in err and "harness error (exit 3)" in err


def test_the_readme_says_how_to_run_the_cli_from_the_venv():
    commands = section("Two commands")
    assert ".venv/bin/conformance" in commands and "source .venv/bin/activate" in commands
    assert ".venv/bin/conformance" in (REPO / "scripts" / "certify.sh").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "flag, named",
    [
        ("--node", "npm"),
        ("--rabbitmq", "RabbitMQ"),
        ("--ocaml", "OCaml"),
        ("--swpt", "swpt_stomp"),
        ("--activemq", "ActiveMQ"),
        ("--test", ".[test]"),
    ],
)
def test_the_full_tier_row_names_what_test_sh_installs(flag, named):
    text = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    full = re.search(r"^\s+full\)\n(.*?);;", text, re.MULTILINE | re.DOTALL).group(1)
    header, rows = table_rows(section("Two commands"))
    tiers = {row[0]: row for row in rows}
    row = " ".join(tiers["full (default)"]) + " " + " ".join(tiers["fast"])
    assert flag in full
    assert named in row, f"the full tier sets up {flag}, the README's row does not name {named}"
    if "install-report-deps.sh" in full:
        assert "Allure" in row and "Chromium" in row
    assert "root" in header[3] and tiers["full (default)"][3].startswith("yes")
