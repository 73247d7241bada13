"""Targets files: parsing, errors users can act on, credentials kept secret."""

import os
import stat

import pytest

from conformance.core.targets import TargetError, TargetRuntime, builtin_targets, load_targets_file

MINIMAL = """
[targets.node]
implementation = "some-ssb"
version = "1.0"
protocol = "ssb"
roles = ["server"]
host = "127.0.0.1"
port = 8008
"""


def write(tmp_path, text):
    path = tmp_path / "targets.toml"
    path.write_text(text)
    return path


def test_builtin_targets_include_the_reference_nodes():
    targets = builtin_targets()
    assert targets["reference-ssb"].protocol == "ssb"
    assert set(targets["reference-ssb"].roles) == {"server", "client"}
    assert targets["reference-ssb"].launchable


def test_minimal_target(tmp_path):
    target = load_targets_file(write(tmp_path, MINIMAL))["node"]
    assert (target.host, target.port, target.roles) == ("127.0.0.1", 8008, ("server",))
    assert not target.launchable


@pytest.mark.parametrize(
    "change, message",
    [
        (('protocol = "ssb"', 'protocol = "gopher"'), "protocol 'gopher' is not one of"),
        (('roles = ["server"]', 'roles = ["observer"]'), "roles must be a non-empty list"),
        (("port = 8008", "port = 70000"), "port must be an integer"),
        (('version = "1.0"', 'version = "1.0"\ncolour = "red"'), "unknown field(s) ['colour']"),
        (('implementation = "some-ssb"\n', ""), "missing required field 'implementation'"),
    ],
)
def test_mistakes_are_reported_with_target_and_field(tmp_path, change, message):
    with pytest.raises(TargetError) as info:
        load_targets_file(write(tmp_path, MINIMAL.replace(*change)))
    assert message in str(info.value)
    assert "'node'" in str(info.value)


def test_secrets_cannot_be_written_inline(tmp_path):
    text = MINIMAL + '\n[targets.node.credentials]\nsecret_key = "abc"\n'
    with pytest.raises(TargetError, match="must end in _file .*, _env .* or _generate"):
        load_targets_file(write(tmp_path, text))


def test_invalid_toml_names_the_file(tmp_path):
    with pytest.raises(TargetError, match="not valid TOML"):
        load_targets_file(write(tmp_path, "[targets.node\n"))


def test_credentials_resolve_but_never_show(tmp_path, monkeypatch):
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(b"FILE-SECRET-VALUE")
    monkeypatch.setenv("NODE_TOKEN", "ENV-SECRET-VALUE")
    text = (
        MINIMAL
        + f'\n[targets.node.credentials]\nsecret_key_file = "{secret_file}"\nnetwork_key_env = "NODE_TOKEN"\n'
    )
    target = load_targets_file(write(tmp_path, text))["node"]
    shown = repr(target) + str(target.describe())
    assert "FILE-SECRET-VALUE" not in shown and "ENV-SECRET-VALUE" not in shown
    runtime = TargetRuntime(target, tmp_path, tmp_path)
    assert runtime.credential("secret_key") == b"FILE-SECRET-VALUE"
    assert runtime.credential("network_key") == b"ENV-SECRET-VALUE"
    path = runtime.credential_file("network_key")
    assert open(path, "rb").read() == b"ENV-SECRET-VALUE"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_missing_env_credential_says_which_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("NODE_TOKEN_UNSET", raising=False)
    text = MINIMAL + '\n[targets.node.credentials]\nnetwork_key_env = "NODE_TOKEN_UNSET"\n'
    runtime = TargetRuntime(load_targets_file(write(tmp_path, text))["node"], tmp_path, tmp_path)
    assert not runtime.has_credential("network_key")
    with pytest.raises(TargetError, match="NODE_TOKEN_UNSET"):
        runtime.credential("network_key")


def test_launch_failure_shows_the_output(tmp_path):
    text = (
        MINIMAL
        + '\n[targets.node.launch]\nserver = "sh -c \'echo starting; echo boom >&2; exit 3\'"\nready = "READY"\n'
    )
    runtime = TargetRuntime(load_targets_file(write(tmp_path, text))["node"], tmp_path, tmp_path)
    with pytest.raises(TargetError) as info:
        runtime.start_server()
    assert "exited with code 3" in str(info.value) and "boom" in str(info.value)


def test_launch_outputs_fill_params_and_port(tmp_path):
    text = MINIMAL.replace("port = 8008", "port = 0") + (
        "\n[targets.node.launch]\nserver = \"sh -c 'echo ID=@abc.ed25519 PORT=4321; echo READY; sleep 30'\"\n"
        'ready = "READY"\noutputs = { public_key = "ID", port = "PORT" }\n'
    )
    runtime = TargetRuntime(load_targets_file(write(tmp_path, text))["node"], tmp_path, tmp_path)
    runtime.start_server()
    try:
        assert runtime.params["public_key"] == "@abc.ed25519"
        assert runtime.port == 4321
    finally:
        runtime.stop()
    assert not runtime.server


def test_generated_credential_is_private_and_stable_within_a_run(tmp_path):
    text = MINIMAL + '\n[targets.node.credentials]\nnetwork_key_generate = "hex16"\n'
    runtime = TargetRuntime(load_targets_file(write(tmp_path, text))["node"], tmp_path, tmp_path)
    assert runtime.has_credential("network_key")
    first = runtime.credential("network_key")
    assert len(first) == 32 and runtime.credential("network_key") == first
    assert stat.S_IMODE(os.stat(runtime.credential_file("network_key")).st_mode) == 0o600


def test_unknown_generator_is_refused(tmp_path):
    text = MINIMAL + '\n[targets.node.credentials]\nnetwork_key_generate = "password123"\n'
    with pytest.raises(TargetError, match="generator must be one of"):
        load_targets_file(write(tmp_path, text))
