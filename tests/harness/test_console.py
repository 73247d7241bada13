"""What the console shows of a case (issue 24, item 9): what the node did,
not the case id and citation again; lines joined, so that an error on the
line after "its output:" shows; cases blocked by one root cause in one
line. The whole message stays in results.jsonl and the trace file."""

from __future__ import annotations

import re

from conformance.core.requirements import level_with_basis
from conformance.core.results import CONSOLE_WIDTH, console_text, own_text

from .cli_runner import WRONG_MSGNO_TARGET, certify

CASE = "ssb.history.client.sends-well-formed-request"
PREFIX = f'{CASE} [MUST, SSB guide, RPC protocol, Request format; createHistoryStream ("Clients must use")]: '


def test_console_text_leads_with_what_the_node_did():
    assert (
        own_text(PREFIX + "clients must use the name sequence", CASE)
        == "clients must use the name sequence"
    )
    assert (
        console_text(PREFIX + 'clients must use the name sequence, not seq: {"seq": 2}', CASE)
        == 'clients must use the name sequence, not seq: {"seq": 2}'
    )
    # The error is on the line after "its output:": joined, it shows.
    assert console_text(
        PREFIX + "target client did not connect; its output:\n"
        "  TypeError: Cannot read properties of undefined (reading 'sequence')",
        CASE,
    ) == (
        "target client did not connect; its output: TypeError: Cannot read properties of undefined "
        "(reading 'sequence')"
    )
    assert console_text("first\n\n  second\nthird") == "first | second | third"


def test_console_text_keeps_the_end_of_a_long_output():
    message = (
        PREFIX
        + "ssb-db2-client did not replicate reference-ssb's feed (exit 5); client output:\n"
        + "".join(f"  log line {n}: {'x' * 60}\n" for n in range(20))
        + "  error: message 3: sequence must be 3, got 4"
    )
    text = console_text(message, CASE)
    assert len(text) <= CONSOLE_WIDTH
    assert text.startswith(
        "ssb-db2-client did not replicate reference-ssb's feed (exit 5); client output: ... | "
    )
    assert text.endswith("| error: message 3: sequence must be 3, got 4")
    # Without a quoted output: cut at the width.
    long = console_text("y" * 1000)
    assert len(long) == CONSOLE_WIDTH and long.endswith("...")


def test_certify_console_shows_the_node_behaviour_and_groups_blocked_cases(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(WRONG_MSGNO_TARGET)
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "wrong-msgno", timeout=120)
    assert run.code == 1, run.output
    lines = run.output.splitlines()
    root = "ripplehost.msgno.server.reply-carries-msgno"
    record = run.by_case("wrong-msgno")[root]
    # The level as every console line shows it: with its basis's word
    # (docs/levels.md; the msgno rule is the text's lower-case "must").
    shown = level_with_basis(record["level"], record["basis"])
    assert shown == "MUST (plain-words)"
    # Progress: the line under the FAIL line is what came instead of what was expected, no prefix.
    at = next(n for n, line in enumerate(lines) if f"FAIL {shown} {root}" in line)
    assert re.fullmatch(
        r"\s+the answer to the MSG with msgno 42 carries msgno 44: RPY msgno 44 .*'\{\"type\":"
        r"\"echo\",\"data\":\"msgno-42-[0-9a-f]+\"\}'",
        lines[at + 1],
    ), lines[at + 1]
    # Blocked cases: one line per run of them, none repeating the reason line by line.
    grouped = [
        line
        for line in lines
        if re.search(
            r"\] blk  \d+ cases \(.*\) blocked by "
            + re.escape(root)
            + r" \(failed\): the answer to the MSG",
            line,
        )
    ]
    assert grouped and "[ 15-28/38] blk  14 cases (10 MUST, 4 SHOULD)" in grouped[0], run.output
    assert sum(line.strip().startswith("blocked by") for line in lines) <= 2, run.output
    # Root causes: the node's behaviour first, and the blocked cases counted.
    at = lines.index(f"  failed {shown} wrong-msgno: {root}")
    assert (
        lines[at + 1].strip().startswith("the answer to the MSG with msgno 42 carries msgno 44")
    ), lines[at + 1]
    assert lines[at + 2].strip().startswith("17 case(s) blocked by it: "), lines[at + 2]
    # The whole message is kept where it was: results.jsonl, the trace, summary.json without the prefix.
    assert record["message"].startswith(f"{root} [{shown}, ")
    assert record["message"] in (run.run_dir / record["trace_file"]).read_text()
    cause = next(c for c in run.summary["targets"][0]["root_causes"] if c["case_id"] == root)
    assert cause["message"].startswith("the answer to the MSG with msgno 42 carries msgno 44")
