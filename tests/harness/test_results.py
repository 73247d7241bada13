"""Result lines survive a killed run; the verdict follows the MUST rule."""

import json

from conformance.core.results import ResultRecord, ResultWriter, read_results, summarize


def record(case_id, level, outcome, target="t"):
    return ResultRecord(run_id="r", time="now", harness_version="0", target=target, implementation="impl",
                        implementation_version="1", protocol="ssb", role="server", case_id=case_id,
                        level=level, citation="c", outcome=outcome, duration_s=0.1)


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
    ok = summarize([r.__dict__ for r in (record("m1", "MUST", "passed"), record("s1", "SHOULD", "failed"),
                                        record("m2", "MUST", "not_applicable"))])
    assert ok["conformant"] and ok["targets"][0]["levels"]["SHOULD"]["failed"] == 1
    failed = summarize([r.__dict__ for r in (record("m1", "MUST", "passed"), record("m2", "MUST", "failed"))])
    assert not failed["conformant"] and failed["targets"][0]["failed_must"] == ["m2"]
    errored = summarize([r.__dict__ for r in (record("m1", "MUST", "passed"), record("m2", "MUST", "error"))])
    assert not errored["conformant"]


def test_nothing_applicable_is_not_conformant():
    assert not summarize([record("m1", "MUST", "not_applicable").__dict__])["conformant"]
    assert not summarize([])["conformant"]
