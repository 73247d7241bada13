"""Result lines survive a killed run; the verdict follows the MUST rule."""

import json

from conformance.core.results import ResultRecord, ResultWriter, read_results, summarize


def record(case_id, level, outcome, target="t"):
    return ResultRecord(
        run_id="r",
        time="now",
        harness_version="0",
        target=target,
        implementation="impl",
        implementation_version="1",
        protocol="ssb",
        role="server",
        case_id=case_id,
        level=level,
        citation="c",
        outcome=outcome,
        duration_s=0.1,
    )


def test_each_record_is_one_complete_line(tmp_path):
    writer = ResultWriter(tmp_path)
    writer.append(record("ssb.a.server.x", "MUST", "passed"))
    writer.append(record("ssb.a.server.y", "MUST", "failed"))
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == ["ssb.a.server.x", "ssb.a.server.y"]


def test_torn_last_line_of_a_killed_run_is_skipped(tmp_path):
    writer = ResultWriter(tmp_path)
    writer.append(record("ssb.a.server.x", "MUST", "passed"))
    with open(tmp_path / "results.jsonl", "a") as handle:
        handle.write('{"case_id": "ssb.a.server.y", "outc')
    assert [r["case_id"] for r in read_results(tmp_path / "results.jsonl")] == ["ssb.a.server.x"]


def test_conformant_needs_every_applicable_must_passed():
    ok = summarize(
        [
            r.__dict__
            for r in (
                record("m1", "MUST", "passed"),
                record("s1", "SHOULD", "failed"),
                record("m2", "MUST", "not_applicable"),
            )
        ]
    )
    assert ok["conformant"] and ok["targets"][0]["levels"]["SHOULD"]["failed"] == 1
    failed = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed"), record("m2", "MUST", "failed"))]
    )
    assert not failed["conformant"] and failed["targets"][0]["failed_must"] == ["m2"]
    errored = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed"), record("m2", "MUST", "error"))]
    )
    assert not errored["conformant"]


def test_nothing_applicable_is_not_conformant():
    assert not summarize([record("m1", "MUST", "not_applicable").__dict__])["conformant"]
    assert not summarize([])["conformant"]


def test_blocked_must_is_not_conformant_and_not_an_own_failure():
    root = record("ssb.shs.server.handshake", "MUST", "failed")
    root.message = "ssb.shs.server.handshake [MUST, c]: no msg2 within 1.0 s"
    blocked = record("ssb.rpc.server.numbering", "MUST", "blocked")
    blocked.message = "blocked by ssb.shs.server.handshake (failed): no msg2 within 1.0 s"
    blocked.blocked_by = "ssb.shs.server.handshake"
    should_blocked = record("ssb.rpc.server.flags", "SHOULD", "blocked")
    should_blocked.blocked_by = "ssb.shs.server.handshake"
    group = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed"), root, blocked, should_blocked)]
    )["targets"][0]
    assert group["failed_must"] == ["ssb.shs.server.handshake"]
    assert group["blocked_must"] == ["ssb.rpc.server.numbering"]
    assert group["levels"]["MUST"]["blocked"] == 1 and group["levels"]["SHOULD"]["blocked"] == 1
    assert group["root_causes"] == [
        {
            "case_id": "ssb.shs.server.handshake",
            "level": "MUST",
            "basis": "keyword",
            "outcome": "failed",
            # What the node did: the case id and citation are in the fields beside it.
            "message": "no msg2 within 1.0 s",
            "trace_file": None,
            "blocked": ["ssb.rpc.server.numbering", "ssb.rpc.server.flags"],
            "start_failure": False,
        }
    ]
    # Blocked alone (its root passed elsewhere, or is missing) still is not conformant.
    only_blocked = summarize([r.__dict__ for r in (record("m1", "MUST", "passed"), blocked)])
    assert not only_blocked["conformant"]
    assert only_blocked["targets"][0]["root_causes"][0]["blocked"] == ["ssb.rpc.server.numbering"]


def test_a_target_that_did_not_start_is_not_certified_unless_a_rule_failed():
    not_started = record("ssb.shs.client.sends-valid-hello", "MUST", "error")
    not_started.message = (
        "TargetNotStarted: target 'x''s client exited with code 1 before it connected\nboom"
    )
    not_started.start_failure = True
    blocked = record("ssb.rpc.client.numbering", "MUST", "blocked")
    blocked.blocked_by = "ssb.shs.client.sends-valid-hello"
    summary = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed"), not_started, blocked)]
    )
    group = summary["targets"][0]
    assert group["verdict"] == summary["verdict"] == "NOT CERTIFIED: the target did not start"
    assert summary["not_started"] == ["t"] and not summary["conformant"]
    assert group["start_failures"] == ["ssb.shs.client.sends-valid-hello"]
    assert group["start_failure"] == not_started.message
    assert group["root_causes"][0]["start_failure"] and group["root_causes"][0]["blocked"] == [
        blocked.case_id
    ]
    # A rule failure seen on the wire outranks a role that did not start.
    failed = summarize([r.__dict__ for r in (record("m2", "MUST", "failed"), not_started)])
    assert failed["verdict"] == failed["targets"][0]["verdict"] == "NOT CONFORMANT"
    assert (
        failed["targets"][0]["start_failures"] == [not_started.case_id]
        and failed["not_started"] == []
    )
    # An ordinary error is no start failure.
    errored = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed"), record("m2", "MUST", "error"))]
    )
    assert errored["verdict"] == "NOT CONFORMANT" and errored["targets"][0]["start_failures"] == []
    # Across targets: not conformant when one is, else not started when one did not start.
    other = summarize(
        [r.__dict__ for r in (record("m1", "MUST", "passed", target="u"), not_started)]
    )
    assert other["verdict"] == "NOT CERTIFIED: the target did not start" and other[
        "not_started"
    ] == ["t"]
    assert summarize([record("m1", "MUST", "passed").__dict__])["verdict"] == "CONFORMANT"


def test_records_written_before_depends_errata_and_blocked_by_still_read(tmp_path):
    old = {
        k: v
        for k, v in record("m1", "MUST", "passed").__dict__.items()
        if k not in ("depends", "errata", "blocked_by")
    }
    old_blocked = dict(
        old, case_id="m2", outcome="blocked", message="blocked by m0 (failed): it broke"
    )
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n" + json.dumps(old_blocked) + "\n")
    records = list(read_results(tmp_path / "results.jsonl"))
    assert [r["case_id"] for r in records] == ["m1", "m2"]
    summary = summarize(records)
    # The root cause is read from the message when the field is missing.
    assert summary["targets"][0]["root_causes"][0]["blocked"] == ["m2"]
    assert not summary["conformant"]
