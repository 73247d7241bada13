"""The `[targets.NAME.container]` table: what it accepts and the errors it
gives (no Docker engine needed), and the shipped containers.toml."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from conformance.core.containers import ContainerServer
from conformance.core.targets import (
    TargetError,
    TargetRuntime,
    builtin_targets,
    load_targets_file,
)

BASE = """
[targets.node]
implementation = "some-btp"
protocol = "btp"
roles = ["server"]

[targets.node.credentials]
auth_token_generate = "hex16"

[targets.node.container]
image = "example/btp:1"
command = "serve --port 7768 --token-file /run/secrets/token"
ports = [7768]
url = "ws://{host}:{port}/"
mounts = { "/run/secrets/token" = "{auth_token_file}" }
writable = { "/out" = "{workdir}/out" }
ready = "READY"
outputs = { node_id = "id" }
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "targets.toml"
    path.write_text(text)
    return load_targets_file(path)["node"]


def test_a_container_target_is_parsed(tmp_path: Path) -> None:
    target = load(tmp_path, BASE)
    spec = target.container
    assert spec is not None and target.launch is None
    assert (spec.image, spec.ports, spec.ready, spec.ready_port) == (
        "example/btp:1",
        (7768,),
        "READY",
        False,
    )
    assert spec.command == ("serve", "--port", "7768", "--token-file", "/run/secrets/token")
    assert target.harness_starts_server
    assert (
        target.describe()["address"] == "container example/btp:1, port 7768 published on 127.0.0.1"
    )


def test_without_ready_the_port_is_the_readiness_check(tmp_path: Path) -> None:
    spec = load(tmp_path, BASE.replace('ready = "READY"\n', "")).container
    assert spec is not None and spec.ready_port is True


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('image = "example/btp:1"', 'image = ""', "image must be an image reference"),
        ("ports = [7768]", "ports = []", "ports must be a non-empty list"),
        ("ports = [7768]", "ports = [70000]", "ports must be a non-empty list"),
        ("ports = [7768]", "ports = [7768, 7768]", "lists a port twice"),
        ('roles = ["server"]', 'roles = ["client"]', "roles does not list 'server'"),
        ('ready = "READY"', 'ready = "("', "ready is not a valid regex"),
        ('ready = "READY"', "ready_port = false", "no readiness check"),
        (
            'ready = "READY"',
            'ready = "READY"\nready_timeout = 0',
            "ready_timeout must be a positive number",
        ),
        (
            'outputs = { node_id = "id" }',
            'outputs = { port = "port" }',
            "outputs cannot set 'port'",
        ),
        (
            'writable = { "/out" = "{workdir}/out" }',
            'writable = { "out" = "{workdir}/out" }',
            "must be an absolute path in the container",
        ),
        (
            'writable = { "/out" = "{workdir}/out" }',
            'writable = { "/run/secrets/token" = "{workdir}/t" }',
            "in both mounts and writable",
        ),
        (
            'ready = "READY"',
            'ready = "READY"\ncredential_env = { TOKEN = "passcode" }',
            "names credential 'passcode', which the target does not have",
        ),
        (
            'ready = "READY"',
            'ready = "READY"\nvolumes = ["/x"]',
            r"unknown field\(s\) \['volumes'\]",
        ),
        (
            "[targets.node.container]",
            '[targets.node.launch]\nserver = "x --port {port}"\n\n[targets.node.container]',
            r"has both \[launch\] and \[container\]",
        ),
    ],
)
def test_invalid_container_tables_name_the_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in BASE
    with pytest.raises(TargetError, match=message) as caught:
        load(tmp_path, BASE.replace(old, new))
    assert "target 'node'" in str(caught.value)


def test_paths_the_node_prints_map_to_the_host_side_of_its_directories(tmp_path: Path) -> None:
    target = load(tmp_path, BASE)
    runtime = TargetRuntime(target, tmp_path / "work", tmp_path / "logs")
    server = ContainerServer(runtime, target.container)
    assert server.host_path("/out/stomp.toml") == str(tmp_path / "work" / "out" / "stomp.toml")
    assert server.host_path("/out") == str(tmp_path / "work" / "out")
    assert server.host_path("/outside/file") == "/outside/file"
    assert server.host_path("@abc=.ed25519") == "@abc=.ed25519"


def test_shipped_container_targets_parse_and_are_package_data() -> None:
    text = (
        resources.files("conformance.targets")
        .joinpath("containers.toml")
        .read_text(encoding="utf-8")
    )
    targets = load_targets_file("containers.toml", text)
    protocols = {
        t.protocol for name, t in targets.items() if name.startswith("container-reference-")
    }
    assert protocols == {"ssb", "btp", "stomp", "ripp", "ripplehost"}
    assert {
        "container-ssb-server",
        "container-ilp-plugin-btp",
        "container-rabbitmq",
        "container-ocaml-ripp",
    } <= set(targets)
    assert all(t.container is not None and t.launch is None for t in targets.values())
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "targets/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["conformance"]


# ------------------------------------------------------------------ [container.client]

CLIENT = (
    BASE.replace('roles = ["server"]', 'roles = ["server", "client"]')
    + """
[targets.node.container.client]
command = "client --url {peer_url} --token-file {auth_token_file}"
mounts = { "/run/secrets/ca.pem" = "{ca_file}" }
env = { LOG_LEVEL = "debug" }
"""
)

CLIENT_ONLY = """
[targets.node]
implementation = "some-ssb-client"
protocol = "ssb"
roles = ["client"]

[targets.node.container]
image = "example/ssb:1"

[targets.node.container.client]
entrypoint = ["/usr/local/bin/tini", "--", "/opt/node/replicate.sh"]
command = "--peer-host {peer_host} --peer-port {peer_port}"
"""


def test_a_client_table_gives_the_target_a_launchable_client_role(tmp_path: Path) -> None:
    target = load(tmp_path, CLIENT)
    client = target.container.client
    assert client is not None and target.can_launch("client") and not target.can_launch("server")
    assert client.image == "example/btp:1"  # the container table's, unless the client names its own
    assert client.command == ("client", "--url", "{peer_url}", "--token-file", "{auth_token_file}")
    assert (dict(client.mounts), dict(client.env), client.entrypoint) == (
        {"/run/secrets/ca.pem": "{ca_file}"},
        {"LOG_LEVEL": "debug"},
        (),
    )
    assert target.harness_starts_server
    # Without the table the client role is not launchable: its cases are not applicable.
    assert not load(tmp_path, BASE).can_launch("client")


def test_a_client_container_has_its_own_connect_timeout(tmp_path: Path) -> None:
    """The client's wait for its connection is [container.client]'s
    ready_timeout (30 s by default), not the server container's."""
    assert load(tmp_path, CLIENT).client_connect_timeout == 30.0
    slow = CLIENT.replace(
        'env = { LOG_LEVEL = "debug" }', 'env = { LOG_LEVEL = "debug" }\nready_timeout = 90'
    )
    target = load(tmp_path, slow)
    assert target.container.client.ready_timeout == 90.0 == target.client_connect_timeout
    assert target.container.ready_timeout == 30.0


def test_shipped_client_containers_wait_as_long_as_their_processes() -> None:
    """A container-X target's client has as long to connect as the built-in
    X's launched process (its broker's or runtime's start is in the wait too)."""
    containers = load_targets_file(
        "containers.toml",
        resources.files("conformance.targets").joinpath("containers.toml").read_text("utf-8"),
    )
    processes = builtin_targets()
    pairs = {
        name: processes[name.removeprefix("container-")]
        for name, target in containers.items()
        if target.can_launch("client") and name.removeprefix("container-") in processes
    }
    assert len(pairs) >= 10
    differ = {
        name: (containers[name].client_connect_timeout, process.client_connect_timeout)
        for name, process in pairs.items()
        if containers[name].client_connect_timeout != process.client_connect_timeout
    }
    assert not differ, differ


def test_a_client_only_container_target_starts_no_server(tmp_path: Path) -> None:
    target = load(tmp_path, CLIENT_ONLY)
    assert (
        target.container is not None
        and not target.container.serves
        and target.container.ports == ()
    )
    assert target.can_launch("client") and not target.harness_starts_server
    assert target.container.client.image == "example/ssb:1"
    assert target.container.client.entrypoint == (
        "/usr/local/bin/tini",
        "--",
        "/opt/node/replicate.sh",
    )
    assert target.describe()["address"] == "(client only, in containers of example/ssb:1)"
    runtime = TargetRuntime(target, tmp_path / "work", tmp_path / "logs")
    runtime.start_server()  # nothing to start, and no engine asked
    assert runtime.container is None


def test_the_client_placeholders_expand_to_host_paths_the_work_dir_mount_keeps(
    tmp_path: Path,
) -> None:
    """The client container gets the work dir at its own path, so a
    credential file the runtime writes there is the same path inside."""
    from conformance.core.containers import ContainerClient

    target = load(tmp_path, CLIENT)
    work = tmp_path / "work"
    work.mkdir()
    runtime = TargetRuntime(target, work, tmp_path / "logs")
    client = ContainerClient(
        runtime, target.container.client, {"peer_url": "ws://127.0.0.1:4242/"}, 1
    )
    assert client.argv == [
        "client",
        "--url",
        "ws://127.0.0.1:4242/",
        "--token-file",
        str(work / "auth_token.credential"),
    ]
    assert client.name.startswith("conformance-node-client-1-")
    assert client.log_path.name.endswith(".client.1.container.log")


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'command = "client --url',
            'commandx = "client --url',
            r"\[container.client\]: unknown field\(s\) \['commandx'\]",
        ),
        (
            'command = "client --url {peer_url} --token-file {auth_token_file}"',
            'image = "example/btp:1"',
            r"\[container.client\]: command is required",
        ),
        (
            'command = "client --url {peer_url} --token-file {auth_token_file}"',
            "command = 7",
            r"\[container.client\] command: a command is a string or a list of strings",
        ),
        (
            'env = { LOG_LEVEL = "debug" }',
            'env = { LOG_LEVEL = "debug" }\nimage = "two words"',
            r"\[container.client\]: image must be an image reference",
        ),
        (
            'env = { LOG_LEVEL = "debug" }',
            "env = { LOG_LEVEL = 3 }",
            r"\[container.client\]: env must be a table of strings",
        ),
        (
            'mounts = { "/run/secrets/ca.pem"',
            'mounts = { "ca.pem"',
            r"\[container.client\]: mounts key 'ca.pem' must be "
            "an absolute path",
        ),
        (
            'env = { LOG_LEVEL = "debug" }',
            'credential_env = { T = "passcode" }',
            r"\[container.client\]: credential_env T names credential 'passcode', which the target does not have",
        ),
        (
            'env = { LOG_LEVEL = "debug" }',
            "ready_timeout = 0",
            r"\[container.client\]: ready_timeout must be a positive number of seconds, got 0",
        ),
        (
            'env = { LOG_LEVEL = "debug" }',
            "entrypoint = 5",
            r"\[container.client\] entrypoint: a command is a string",
        ),
        (
            'roles = ["server", "client"]',
            'roles = ["server"]',
            r"\[container.client\]: runs the node's client role, "
            "but roles does not list 'client'",
        ),
    ],
)
def test_invalid_client_tables_name_the_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in CLIENT
    with pytest.raises(TargetError, match=message) as caught:
        load(tmp_path, CLIENT.replace(old, new, 1))
    assert "target 'node'" in str(caught.value)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            "ports = [8008]",
            r"\[container\]: ports configure\(s\) the server role, which the target does not play",
        ),
        ('ready = "READY"', r"\[container\]: ready configure\(s\) the server role"),
        ('command = "serve"', r"\[container\]: command configure\(s\) the server role"),
    ],
)
def test_a_client_only_container_table_refuses_server_fields(
    tmp_path: Path, extra: str, message: str
) -> None:
    text = CLIENT_ONLY.replace('image = "example/ssb:1"\n', f'image = "example/ssb:1"\n{extra}\n')
    with pytest.raises(TargetError, match=message):
        load(tmp_path, text)


SERVICE = """
[targets.node.container.client.service]
command = "broker --state-dir {workdir}/broker"
ready = 'BROKER_READY port=\\d+'
"""


def test_a_client_service_is_parsed_with_its_own_ready_wait(tmp_path: Path) -> None:
    """[container.client.service]: one container for the run beside the
    launches, from the client's image; ready_timeout 60 s unless given."""
    service = load(tmp_path, CLIENT_ONLY + SERVICE).container.client.service
    assert service is not None
    assert service.command == ("broker", "--state-dir", "{workdir}/broker")
    assert (service.ready, service.ready_timeout) == (r"BROKER_READY port=\d+", 60.0)
    slow = load(tmp_path, CLIENT_ONLY + SERVICE + "ready_timeout = 150\n")
    assert slow.container.client.service.ready_timeout == 150.0
    assert load(tmp_path, CLIENT_ONLY).container.client.service is None


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('command = "broker', 'commands = "broker', r"unknown field\(s\) \['commands'\]"),
        ('command = "broker --state-dir {workdir}/broker"\n', "", r"command is required"),
        ("ready = 'BROKER_READY port=\\d+'\n", "", r"ready is required: a regex"),
        (
            "ready = 'BROKER_READY",
            "ready = '(BROKER_READY",
            r"ready '\(BROKER_READY.*' is not a regex",
        ),
    ],
)
def test_invalid_client_service_tables_name_the_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    text = CLIENT_ONLY + SERVICE
    assert old in text
    with pytest.raises(TargetError, match=r"\[container.client.service\]: .*" + message):
        load(tmp_path, text.replace(old, new, 1))


def test_the_shipped_swpt_client_container_keeps_its_broker_in_a_service() -> None:
    """container-swpt-client's launches share the RabbitMQ its service
    container keeps for the run (--shared-broker, the keeper's ready line)."""
    client = load_targets_file(
        "containers.toml",
        resources.files("conformance.targets").joinpath("containers.toml").read_text("utf-8"),
    )["container-swpt-client"].container.client
    assert client.service is not None and client.service.command[0] == "broker"
    assert client.service.ready.startswith("SHARED_BROKER_READY")
    assert "--shared-broker" in client.command


def test_a_client_only_target_needs_the_client_table(tmp_path: Path) -> None:
    text = CLIENT_ONLY.split("[targets.node.container.client]")[0]
    with pytest.raises(
        TargetError,
        match=r"a container without a \[container.client\] table runs the node's "
        "server role, but roles does not list 'server'",
    ):
        load(tmp_path, text)


def test_shipped_reference_container_targets_play_the_client_role() -> None:
    text = (
        resources.files("conformance.targets")
        .joinpath("containers.toml")
        .read_text(encoding="utf-8")
    )
    targets = load_targets_file("containers.toml", text)
    for protocol in ("ssb", "btp", "stomp", "ripp", "ripplehost"):
        target = targets[f"container-reference-{protocol}"]
        assert "client" in target.roles and target.can_launch("client"), target.name
        assert target.container.client.image == "conformance/reference:dev"
        assert target.container.client.command[0] == protocol  # reference-node PROTOCOL ...
    assert targets["container-ilp-plugin-btp"].can_launch("client")
    assert targets["container-ssb-server-client"].roles == ("client",)
    assert targets["container-ssb-server-client"].can_launch("client")
