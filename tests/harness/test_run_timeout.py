"""`--run-timeout`: a per-target deadline bounding the whole run. Cases not
started when it passes are recorded as `error`, never dropped; a session
that outlives it is stopped by the CLI, keeping what it recorded."""

from __future__ import annotations


from conformance.core.results import summarize

from .cli_runner import STUCK_TARGET, certify
from .fake_suite import Listener, run_suite, targets_file, write_suite

SLOW_CASES = "".join(
    f"""
@requirement("stomp.slow.server.case-{n}", "MUST", "Fake spec §{n}")
async def test_case_{n}(connect):
    conn = await connect()
    await conn.receive_exactly(4, "an answer the target never sends")
"""
    for n in range(12)
)


RUN_TIMEOUT = 6
"""The run's bound counts from the session's start, its start-up included
(at a load average of 14 in a full tier, no case had begun when a 1.5 s
bound passed). Six seconds leave room for at least one case however slow
the start, and cut at least five of the twelve cases, each of which waits
out its read deadline (1 s). The listener answers each connection with one
byte of the four a case waits for: a target that sent nothing in three
cases in a row would be given up as unresponsive, which is another rule."""


def test_slow_target_is_cut_off_at_the_run_deadline_with_every_case_recorded(tmp_path):
    # Answers one byte of four: every case waits out its read deadline (1 s).
    with Listener(greeting=b"\n") as server:
        run = run_suite(
            tmp_path,
            write_suite(tmp_path, SLOW_CASES),
            targets_file(tmp_path, server.port),
            "--run-timeout",
            str(RUN_TIMEOUT),
        )
    records = run.records
    assert [r["case_id"] for r in records] == [f"stomp.slow.server.case-{n}" for n in range(12)], (
        "every case gets a result line, none is dropped"
    )
    ran = [r for r in records if "run deadline" not in r["message"]]
    cut = [r for r in records if r not in ran]
    # The cases started before the deadline ended at their own read deadline, as failures.
    assert 1 <= len(ran) <= RUN_TIMEOUT + 1 and all(
        r["outcome"] == "failed" and r["duration_s"] < 2.5 for r in ran
    )
    assert cut and all(r["outcome"] == "error" for r in cut)
    assert all(
        r["message"] == f"run deadline of {RUN_TIMEOUT} s exceeded (--run-timeout); case not run"
        for r in cut
    )
    assert summarize(records)["targets"][0]["levels"]["MUST"]["error"] == len(cut)


def test_session_that_outlives_the_run_deadline_is_stopped_and_its_cases_recorded(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(STUCK_TARGET)
    run = certify(
        tmp_path,
        "--targets-file",
        str(targets),
        "--target",
        "stuck",
        "--deadline",
        "1",
        "--run-timeout",
        "1",
        timeout=120,
    )
    assert run.code == 1, run.output
    records = run.records
    assert len(records) >= 40
    assert all(
        r["outcome"] == "error"
        and "run deadline of 1 s exceeded" in r["message"]
        and "stopped the session" in r["message"]
        for r in records
    )
    assert "the session outlived it and was stopped" in run.output
    assert run.summary["cases"] == len(records)
    assert run.seconds < 40, f"took {run.seconds:.0f} s"
