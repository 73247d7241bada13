"""Unknown keys in [params] and [credentials] (issue 24): a typo such as
`pubic_key` is refused when the targets file is read, naming the key and the
closest known one, as unknown top-level fields are; the known keys are
declared per protocol (KNOWN_PARAMS, KNOWN_CREDENTIALS) and checked here
against what the suites and interop cases read."""

from __future__ import annotations

import re
import textwrap
import tokenize
from pathlib import Path

import pytest

from conformance.core.targets import (
    KNOWN_CREDENTIALS,
    KNOWN_PARAMS,
    KNOWN_PROTOCOLS,
    RUN_PKI_FILES,
    TargetError,
    load_targets_file,
)

from .cli_runner import run_cli

REPO = Path(__file__).resolve().parents[2]

SSB_NODE = """
[targets.my-node]
implementation = "my-ssb"
version = "0.3.1"
protocol = "ssb"
roles = ["server"]
host = "127.0.0.1"
port = 8008
"""


def parse(text: str):
    return load_targets_file("my-node.toml", textwrap.dedent(text))


def test_a_typo_in_params_names_the_key_and_the_closest_known_one():
    with pytest.raises(TargetError) as info:
        parse(SSB_NODE + '[targets.my-node.params]\npubic_key = "@AAAA.ed25519"\n')
    message = str(info.value)
    assert message.startswith(
        "my-node.toml: target 'my-node' [params]: unknown param(s) ['pubic_key'] "
        "(did you mean 'public_key'?); the ssb cases read: public_key"
    )
    assert "missing" not in message


def test_the_cli_stops_with_exit_2_on_the_typo_not_on_a_missing_key(tmp_path):
    targets = tmp_path / "my-node.toml"
    targets.write_text(SSB_NODE + '[targets.my-node.params]\npubic_key = "@AAAA.ed25519"\n')
    for command in (["targets"], ["certify", "--target", "my-node"]):
        done = (
            run_cli(
                *command,
                "--targets-file",
                str(targets),
                "--reports-dir",
                str(tmp_path / "reports"),
                timeout=60,
            )
            if command[0] == "certify"
            else run_cli(*command, "--targets-file", str(targets), timeout=60)
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "unknown param(s) ['pubic_key'] (did you mean 'public_key'?)" in done.stderr
        assert "public_key is missing" not in done.stderr + done.stdout


def test_a_typo_in_credentials_keeps_its_suffix_in_the_suggestion():
    with pytest.raises(TargetError) as info:
        parse(
            SSB_NODE
            + '[targets.my-node.credentials]\nnetwrok_key_file = "/etc/caps"\nsecret_key_env = "K"\n'
        )
    assert (
        "[credentials]: unknown credential(s) ['netwrok_key_file'] (did you mean 'network_key_file'?); "
        "the ssb cases read: network_key, secret_key"
    ) in str(info.value)


def test_params_and_credentials_are_reported_together():
    with pytest.raises(TargetError) as info:
        parse(
            SSB_NODE + "[targets.my-node.params]\nauth_timeout = 5\n"
            '[targets.my-node.credentials]\nauth_token_env = "T"\n'
        )
    message = str(info.value)
    # auth_timeout and auth_token are BTP's: known to another protocol is not known to this one.
    assert (
        "unknown param(s) ['auth_timeout']" in message
        and "unknown credential(s) ['auth_token_env']" in message
    )


def test_a_key_far_from_any_known_one_gets_no_suggestion():
    with pytest.raises(TargetError) as info:
        parse(SSB_NODE + '[targets.my-node.params]\ncolour = "blue"\n')
    assert "unknown param(s) ['colour']; the ssb cases read: public_key" in str(info.value)


def test_keys_the_targets_own_commands_name_are_known():
    targets = parse(
        SSB_NODE.replace('host = "127.0.0.1"\nport = 8008\n', "port = 0\n")
        + textwrap.dedent("""
        [targets.my-node.params]
        public_key = "@AAAA.ed25519"
        data_dir = "/srv/my-node"
        [targets.my-node.credentials]
        license_file = "/etc/my-node/license"
        [targets.my-node.launch]
        server = "my-node serve --port {port} --data {data_dir} --license {license_file}"
        """)
    )
    assert targets["my-node"].params["data_dir"] == "/srv/my-node"
    assert "license" in targets["my-node"].credentials


def test_a_containers_credential_env_makes_its_credential_known():
    targets = parse("""
        [targets.boxed]
        implementation = "boxed"
        protocol = "ripp"
        roles = ["server"]
        [targets.boxed.credentials]
        licence_env = "MY_LICENCE"
        [targets.boxed.container]
        image = "example/ripp:1"
        ports = [7000]
        credential_env = { LICENCE = "licence" }
        """)
    assert "licence" in targets["boxed"].credentials


def test_unknown_top_level_fields_get_the_suggestion_too():
    with pytest.raises(
        TargetError, match=r"unknown field\(s\) \['verison'\] \(did you mean 'version'\?\)"
    ):
        parse(SSB_NODE + 'verison = "1"\n')


def test_every_built_in_and_container_target_passes_the_check():
    for path in (REPO / "conformance" / "targets").glob("*.toml"):
        assert load_targets_file(path)


def test_the_compose_stacks_targets_pass_the_check():
    # docker/compose/init.py renders this template in the init service; a key
    # the check refuses stops the compose harness with exit 2 (seen in CI:
    # an informational `hostname` param), so it is checked here, in seconds.
    import string

    template = REPO / "docker" / "compose" / "targets.template.toml"
    text = string.Template(template.read_text(encoding="utf-8")).substitute(
        SSB_PUBLIC_KEY="@" + "A" * 43 + "=.ed25519"
    )
    assert len(load_targets_file("targets.toml", text)) == 5


# --- the declarations are exact: what the cases read, and nothing else --------------------------

PARAM_READS = (r"params\.get\(\s*\"([a-z_]+)\"", r"params\[\s*\"([a-z_]+)\"\s*\]")
PARAM_NAMED = r"\bparams\.([a-z_]+)\b"
"""In messages and docstrings (string literals only): "params.auth_timeout must be ..."."""
CREDENTIAL_READS = (
    r"credential(?:_file)?\(\s*\"([a-z_]+)\"",
    r"\"credential:([a-z_]+)\"",
    r"\"([a-z_]+)\" (?:not )?in (?:runtime\.|self\.)?target\.credentials",
)
NOT_KEYS = {"get", "items", "keys", "values", "copy", "update", "setdefault", "pop"}


def source_files(protocol: str) -> list[Path]:
    return [
        *(REPO / "conformance" / "suites" / protocol).glob("*.py"),
        *(REPO / "conformance" / "interop" / protocol).glob("*.py"),
    ]


def sources(protocol: str) -> str:
    return "\n".join(f.read_text(encoding="utf-8") for f in source_files(protocol))


def string_literals(protocol: str) -> str:
    out = []
    for path in source_files(protocol):
        with path.open(encoding="utf-8") as handle:
            out += [
                tok.string
                for tok in tokenize.generate_tokens(handle.readline)
                if tok.type == tokenize.STRING
            ]
    return "\n".join(out)


def reads(text: str, patterns: tuple[str, ...]) -> set[str]:
    return {key for pattern in patterns for key in re.findall(pattern, text)} - NOT_KEYS


@pytest.mark.parametrize("protocol", KNOWN_PROTOCOLS)
def test_every_key_a_suite_reads_is_declared(protocol):
    text = sources(protocol)
    params = reads(text, PARAM_READS) | reads(string_literals(protocol), (PARAM_NAMED,))
    assert params <= KNOWN_PARAMS[protocol], (
        f"{protocol}: params read but not in KNOWN_PARAMS: {params - KNOWN_PARAMS[protocol]}"
    )
    assert reads(text, CREDENTIAL_READS) <= KNOWN_CREDENTIALS[protocol], (
        f"{protocol}: credentials read but not in KNOWN_CREDENTIALS: "
        f"{reads(text, CREDENTIAL_READS) - KNOWN_CREDENTIALS[protocol]}"
    )


@pytest.mark.parametrize("protocol", KNOWN_PROTOCOLS)
def test_every_declared_key_is_read_by_the_protocols_code(protocol):
    """No key is declared that nothing reads: each is named in the suite or
    its interop cases, or is one of the run's PKI files, which the suite's
    preparation puts into the params unless the target gives its own."""
    text = sources(protocol)
    uses_run_pki = "run_pki()" in text
    for key in KNOWN_PARAMS[protocol]:
        assert f'"{key}"' in text or (uses_run_pki and key in RUN_PKI_FILES), (
            f"{protocol}: param {key} is read nowhere"
        )
    for name in KNOWN_CREDENTIALS[protocol]:
        assert f'"{name}"' in text or (uses_run_pki and f"{name}_file" in RUN_PKI_FILES), (
            f"{protocol}: credential {name} is read nowhere"
        )
