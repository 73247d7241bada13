"""BTP certification end to end through the CLI: the reference node passes
with no secret in anything the run wrote, and each deliberately broken
reference node fails exactly the rules it breaks."""

from __future__ import annotations

import secrets

import pytest

from conformance.core.requirements import level_with_basis
from reference_impl.btp.faults import SPECS as BTP_FAULTS

from .cli_runner import certify

SERVER = (
    "{python} -m reference_impl.btp serve --host {host} --port 0 --auth-token-file {auth_token_file} "
    "--auth-timeout 2 --initial-balance 0 --max-balance 1000000"
)
CLIENT = (
    "{python} -m reference_impl.btp client --url {peer_url} --auth-token-file {auth_token_file} "
    "--stay {client_stay} --send-message {send_message}"
)


def btp_target(
    name: str, credentials: str, server: str = SERVER, client: str | None = CLIENT
) -> str:
    roles = '["server", "client"]' if client else '["server"]'
    return f"""
[targets.{name}]
implementation = "reference-btp-{name}"
version = "test"
protocol = "btp"
roles = {roles}
capabilities = ["balance"]
host = "127.0.0.1"
port = 0

[targets.{name}.params]
auth_timeout = 2

[targets.{name}.credentials]
{credentials}

[targets.{name}.launch]
server = "{server}"
{f'client = "{client}"' if client else ""}
ready = "BTP_READY"
outputs = {{ url = "url", port = "port" }}
cwd = "{{repo}}"
"""


def test_reference_btp_is_conformant_and_its_token_is_never_written(tmp_path, monkeypatch):
    token = "tok-" + secrets.token_hex(12)
    monkeypatch.setenv("CONFORMANCE_TEST_BTP_TOKEN", token)
    targets = tmp_path / "targets.toml"
    targets.write_text(btp_target("env-token", 'auth_token_env = "CONFORMANCE_TEST_BTP_TOKEN"'))
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "env-token", timeout=300)
    assert run.code == 0, run.output
    assert "env-token [reference-btp-env-token test, btp]: CONFORMANT" in run.output
    records = run.by_case("env-token")
    assert len(records) >= 30 and {r["role"] for r in records.values()} == {"server", "client"}
    # The token crosses the wire in the clear (the auth Message); traces,
    # Allure attachments, JUnit, results and logs must mask it.
    traces = list((run.run_dir / "traces" / "env-token").glob("*.txt"))
    assert traces and any("[redacted]" in t.read_text() for t in traces)
    forms = (token, token.encode().hex())
    assert not any(form in run.output for form in forms)
    for path in run.run_dir.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            assert not any(form in text for form in forms), f"the auth token is in {path}"


# A few faults of `python -m reference_impl.btp serve --fault`, with the cases
# that must catch them as the fault catalogue (reference_impl/btp/faults.py)
# lists them (server-role cases: the fault lives in the server).
FAULTS = {
    spec.name: set(spec.cases)
    for spec in BTP_FAULTS
    if spec.name
    in (
        "no-auth-required",
        "reply-to-unexpected",
        "reply-to-unreadable",
        "wrong-request-id",
        "balance-on-error",
        "accept-wrong-token",
    )
}


def test_each_broken_btp_node_fails_the_rules_it_breaks(tmp_path):
    text = "".join(
        btp_target(
            f"fault-{fault}",
            'auth_token_generate = "hex16"',
            server=SERVER + f" --fault {fault}",
            client=None,
        )
        for fault in FAULTS
    )
    targets = tmp_path / "targets.toml"
    targets.write_text(text)
    args = ["--targets-file", str(targets)]
    for fault in FAULTS:
        args += ["--target", f"fault-{fault}"]
    run = certify(tmp_path, *args, timeout=600)
    assert run.code == 1, run.output
    for fault, expected in FAULTS.items():
        name = f"fault-{fault}"
        records = run.by_case(name)
        not_passed = {
            case for case, r in records.items() if r["outcome"] not in ("passed", "not_applicable")
        }
        assert expected <= not_passed, f"{fault}: {sorted(not_passed)}\n{run.output[-3000:]}"
        for case in not_passed:
            record = records[case]
            if case not in expected:
                # Only the fault's own cases fail; a case relying on one of
                # them is blocked by it, never failed for a rule not its own.
                assert record["outcome"] == "blocked" and record["blocked_by"] in expected, record
                assert record["message"].startswith(
                    f"blocked by {record['blocked_by']} (failed): "
                ), record
                continue
            assert record["outcome"] == "failed", record
            # The message names the requirement, its level with the level's
            # basis ("SHOULD (plain-words)"); the trace shows the bytes.
            shown = level_with_basis(record["level"], record["basis"])
            assert record["message"].startswith(f"{case} [{shown}, BTP 2.0"), record["message"]
            trace = (run.run_dir / record["trace_file"]).read_text()
            assert "harness -> target" in trace and "00000000" in trace
        # Only a failed MUST costs the verdict; reply-to-unexpected breaks SHOULDs.
        verdict = (
            "NOT CONFORMANT"
            if any(records[c]["level"] == "MUST" for c in expected)
            else "CONFORMANT"
        )
        assert f"{name} [reference-btp-{name} test, btp]: {verdict}" in run.output, fault
    assert {
        records["level"]
        for records in (
            run.by_case("fault-reply-to-unexpected")[c] for c in FAULTS["reply-to-unexpected"]
        )
    } == {"SHOULD"}


@pytest.mark.parametrize("secret", [b"abcd-secret", b"\x00\x01\x02\x03\xff"])
def test_redactor_masks_every_form(secret):
    from conformance.core.redact import MASK, Redactor
    from conformance.core.transport import WireTrace

    redactor = Redactor([secret])
    message = f"got {secret!r}, hex {secret.hex()}"
    assert secret.hex() not in redactor.text(message) and MASK in redactor.text(message)
    trace = WireTrace(redactor=redactor)
    trace.record("sent", b"\x06head" + secret + b"tail", f"note with {secret.hex()}")
    rendered = trace.render()
    assert secret.hex() not in rendered and "** ** **" in rendered and "head" in rendered
    assert not any(
        " ".join(f"{b:02x}" for b in secret[i : i + 3]) in rendered for i in range(len(secret) - 2)
    )


def test_redactor_ignores_values_too_short_to_protect_anything():
    from conformance.core.redact import Redactor

    assert Redactor([b"ab", b""]).text("ab ab") == "ab ab"


SILENT_SERVER = """
import asyncio
from websockets.asyncio.server import serve

async def handler(ws):
    async for _ in ws:   # reads everything, answers nothing
        pass

async def main():
    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"BTP_READY url=ws://127.0.0.1:{port}/ port={port}", flush=True)
        await asyncio.Future()

asyncio.run(main())
"""


def test_btp_server_that_never_answers_ends_quickly_with_a_clear_verdict(tmp_path):
    script = tmp_path / "silent_ws.py"
    script.write_text(SILENT_SERVER)
    targets = tmp_path / "targets.toml"
    targets.write_text(
        btp_target(
            "silent", 'auth_token_generate = "hex16"', server=f"{{python}} {script}", client=None
        ).replace('capabilities = ["balance"]', "capabilities = []")
    )
    run = certify(tmp_path, "--targets-file", str(targets), "--target", "silent", timeout=120)
    assert run.code == 1 and "silent [reference-btp-silent test, btp]: NOT CONFORMANT" in run.output
    assert run.seconds < 60, f"took {run.seconds:.0f} s"
    records = run.by_case("silent")
    # One root cause, authentication; the cases relying on it are blocked by it.
    assert records["btp.auth.server.accepts-valid-auth"]["outcome"] == "failed"
    assert not any(r["outcome"] in ("passed", "error") for r in records.values())
    causes = {c["case_id"]: c for c in run.summary["targets"][0]["root_causes"]}
    assert list(causes) == ["btp.auth.server.accepts-valid-auth"]
    assert len(causes["btp.auth.server.accepts-valid-auth"]["blocked"]) >= 10
    # Cases that would not apply stay not applicable, silence or not.
    for case in (
        "btp.transfer.server.response-means-balance-updated",
        "btp.transfer.server.error-means-balance-unchanged",
    ):
        assert records[case]["outcome"] == "not_applicable", records[case]
    assert all(r["outcome"] == "not_applicable" for c, r in records.items() if ".client." in c)
