"""`conformance certify` end to end, against the reference node, broken
variants of it, a node that never answers, and a run that gets killed."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from reference_impl.ssb.faults import SPECS as SSB_FAULTS
from reference_impl.ssb.keys import Keypair

from .cli_runner import CONFORMANCE, REPO_ROOT, certify

REFERENCE_SERVER = (
    "{python} -m reference_impl.ssb serve --key-file {workdir}/server-secret --create-key "
    "--host {host} --port 0 --seed-messages 5"
)


def reference_variant(
    name: str,
    server: str = REFERENCE_SERVER,
    roles: str = '["server"]',
    credentials: str = 'secret_key_file = "{workdir}/server-secret"',
) -> str:
    return f"""
[targets.{name}]
implementation = "reference-ssb-{name}"
version = "test"
protocol = "ssb"
roles = {roles}
capabilities = ["publish"]
[targets.{name}.credentials]
{credentials}
[targets.{name}.launch]
server = "{server}"
ready = "SSB_READY"
outputs = {{ public_key = "id", port = "port" }}
cwd = "{{repo}}"
"""


def test_reference_node_certifies_with_every_artifact(tmp_path):
    key_file = tmp_path / "known-secret"
    keypair = Keypair.generate()
    keypair.save(key_file)
    server = REFERENCE_SERVER.replace("{workdir}/server-secret", str(key_file))
    targets = tmp_path / "targets.toml"
    targets.write_text(
        reference_variant(
            "known-key",
            server,
            roles='["server", "client"]',
            credentials=f'secret_key_file = "{key_file}"',
        ).replace(
            "[targets.known-key.launch]\n",
            '[targets.known-key.launch]\nclient = "{python} -m reference_impl.ssb replicate --peer-host {peer_host} '
            '--peer-port {peer_port} --peer-public-key {peer_public_key} --feed {feed} --timeout {client_timeout}"\n',
        )
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "known-key")
    assert run.code == 0, run.output
    assert "known-key [reference-ssb-known-key test, ssb]: CONFORMANT" in run.output
    summary = run.summary
    assert summary["conformant"] and summary["targets"][0]["levels"]["MUST"]["failed"] == 0
    records = run.records
    assert len(records) >= 40 and all(r["outcome"] == "passed" for r in records)
    assert {r["role"] for r in records} == {"server", "client"}
    for field in (
        "run_id",
        "time",
        "harness_version",
        "implementation",
        "implementation_version",
        "protocol",
        "role",
        "case_id",
        "level",
        "outcome",
        "duration_s",
        "message",
    ):
        assert field in records[0]
    assert (run.run_dir / "junit-known-key.xml").is_file()
    results = [
        json.loads(p.read_text()) for p in (run.run_dir / "allure-results").glob("*-result.json")
    ]
    assert len(results) == len(records)
    sample = next(r for r in results if r["name"] == "ssb.shs.server.rejects-tampered-msg3")
    labels = {(label["name"], label["value"]) for label in sample["labels"]}
    assert {
        ("protocol", "ssb"),
        ("component", "shs"),
        ("severity", "blocker"),
        ("requirement", "ssb.shs.server.rejects-tampered-msg3"),
    } <= labels
    attachment = run.run_dir / "allure-results" / sample["attachments"][0]["source"]
    assert "harness -> target  64 bytes  msg1: client hello" in attachment.read_text()
    # The node's secret key never lands in anything the run wrote.
    secret_text = json.loads(
        "\n".join(line for line in key_file.read_text().splitlines() if not line.startswith("#"))
    )["private"]
    secret_b64 = secret_text.split(".")[0]
    for path in run.run_dir.rglob("*"):
        if path.is_file():
            assert secret_b64 not in path.read_text(errors="replace"), f"secret key found in {path}"


# A few faults of `python -m reference_impl.ssb serve --fault`, with the cases
# that must catch them as the fault catalogue (reference_impl/ssb/faults.py)
# lists them; the mutation test runs every fault.
FAULTS = {
    spec.name: list(spec.cases)
    for spec in SSB_FAULTS
    if spec.name
    in (
        "accept-any-network-key",
        "write-after-bad-handshake",
        "exclusive-sequence",
        "bad-signature",
        "no-error-on-unknown",
        "ignore-goodbye",
    )
}


def test_each_broken_node_fails_the_rule_it_breaks(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        "".join(
            reference_variant(f"fault-{fault}", REFERENCE_SERVER + f" --fault {fault}")
            for fault in FAULTS
        )
    )
    run = certify(
        tmp_path, "--targets-file", str(targets), *[f"--target=fault-{f}" for f in FAULTS]
    )
    assert run.code == 1, run.output
    verdicts = {g["target"]: g for g in run.summary["targets"]}
    for fault, expected in FAULTS.items():
        cases = run.by_case(f"fault-{fault}")
        for case_id in expected:
            record = cases[case_id]
            assert record["outcome"] == "failed", (fault, case_id, record)
            assert case_id in record["message"] and record["trace_file"]
        # The fault breaks its rule and no other: every other case that did
        # not pass is blocked by one of the cases that caught it.
        for case_id, record in cases.items():
            if case_id not in expected and record["outcome"] not in ("passed", "not_applicable"):
                assert record["outcome"] == "blocked" and record["blocked_by"] in expected, (
                    fault,
                    case_id,
                    record,
                )
    assert not verdicts["fault-exclusive-sequence"]["conformant"]
    # closes-after-goodbye is a SHOULD: a node breaking only it is still conformant.
    assert verdicts["fault-ignore-goodbye"]["conformant"]


def test_failure_message_names_requirement_and_shows_bytes(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(
        reference_variant("bad-hs", REFERENCE_SERVER + " --fault write-after-bad-handshake")
    )
    run = certify(
        tmp_path, "--targets-file", str(targets), "--target", "bad-hs", "-k", "garbage_msg1"
    )
    record = run.by_case("bad-hs")["ssb.shs.server.rejects-garbage-msg1"]
    assert record["outcome"] == "failed"
    assert record["message"].startswith(
        "ssb.shs.server.rejects-garbage-msg1 [MUST (profile), SSB guide"
    )
    assert "wrote 16 byte(s) instead of hanging up silently" in record["message"]
    trace = (run.run_dir / record["trace_file"]).read_text()
    assert "target -> harness  16 bytes" in trace


class SilentServer:
    """Accepts TCP connections and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_target_that_never_answers_ends_quickly_with_a_clear_verdict(tmp_path):
    server = SilentServer()
    try:
        targets = tmp_path / "targets.toml"
        targets.write_text(f"""
[targets.silent]
implementation = "black-hole"
protocol = "ssb"
roles = ["server"]
host = "127.0.0.1"
port = {server.port}
[targets.silent.params]
public_key = "{Keypair.generate().feed_id}"
""")
        run = certify(tmp_path, "--targets-file", str(targets), "--target", "silent", timeout=120)
    finally:
        server.close()
    assert run.code == 1, run.output
    assert "silent [black-hole unknown, ssb]: NOT CONFORMANT" in run.output
    records = run.records
    assert len(records) >= 40, "every case gets a result line, none is dropped"
    assert not any(r["outcome"] == "passed" for r in records)
    # One root cause, the handshake, and the cases that rely on it blocked
    # by it rather than failing each for a rule not their own.
    handshake = run.by_case("silent")["ssb.shs.server.completes-valid-handshake"]
    assert handshake["outcome"] == "failed"
    causes = {c["case_id"]: c for c in run.summary["targets"][0]["root_causes"]}
    assert len(causes["ssb.shs.server.completes-valid-handshake"]["blocked"]) >= 10
    assert (
        run.output.index("root causes")
        < run.output.index("passed failed")
        < run.output.index("NOT CONFORMANT")
    )
    assert run.seconds < 90, f"took {run.seconds:.0f} s"


def test_cases_needing_a_missing_role_are_not_applicable(tmp_path):
    targets = tmp_path / "targets.toml"
    targets.write_text(reference_variant("server-only"))
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "server-only")
    assert run.code == 0, run.output
    na = [r for r in run.records if r["outcome"] == "not_applicable"]
    assert na and all(r["role"] == "client" for r in na)
    assert all("does not play the client role" in r["message"] for r in na)


def test_unknown_target_is_a_usage_error(tmp_path):
    run = certify(tmp_path, "--target", "no-such-node")
    assert run.code == 2 and "unknown target 'no-such-node'" in run.output


def test_killed_run_keeps_every_finished_case(tmp_path):
    run_dir = tmp_path / "run"
    # Its own temp dir: the node is then found by its work dir's path, not
    # mistaken for another run's (another suite may run beside this one).
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    process = subprocess.Popen(
        CONFORMANCE + ["certify", "--run-dir", str(run_dir)],
        cwd=REPO_ROOT,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results = run_dir / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.is_file() and results.read_text().count("\n") >= 5:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    lines = results.read_text().splitlines()
    assert len(lines) >= 5
    for line in lines:
        assert json.loads(line)["outcome"] in ("passed", "failed", "not_applicable", "error")
    # The launched node dies with the harness (it gets SIGTERM when its
    # parent dies): gone within 1 s, as soon as it is.
    gone_by = time.monotonic() + 1
    node = re.compile(
        rf"reference_impl\.ssb serve.*{re.escape(str(tmpdir))}/conformance-reference-ssb"
    )
    while True:
        leftover = processes_matching(node)
        if not leftover or time.monotonic() > gone_by:
            break
        time.sleep(0.05)
    assert not leftover, f"node still running 1 s after the harness was killed: {leftover}"


def processes_matching(pattern: re.Pattern[str]) -> list[str]:
    """The command lines (from /proc, as `pgrep -f` reads them, without
    needing procps, which a new Debian lacks) that match ``pattern``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        if cmdline.parent.name == str(os.getpid()):  # as pgrep, not this process
            continue
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # the process ended while we looked
            continue
        if pattern.search(text):
            found.append(f"{cmdline.parent.name}: {text}")
    return found


@pytest.fixture(autouse=True)
def _no_stray_reports(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    yield
