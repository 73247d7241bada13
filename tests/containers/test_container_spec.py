"""The `[targets.NAME.container]` table: what it accepts and the errors it
gives (no Docker engine needed), and the shipped containers.toml."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from conformance.core.containers import ContainerServer
from conformance.core.targets import TargetError, TargetRuntime, load_targets_file

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
    assert (spec.image, spec.ports, spec.ready, spec.ready_port) == ("example/btp:1", (7768,), "READY", False)
    assert spec.command == ("serve", "--port", "7768", "--token-file", "/run/secrets/token")
    assert target.harness_starts_server
    assert target.describe()["address"] == "container example/btp:1, port 7768 published on 127.0.0.1"


def test_without_ready_the_port_is_the_readiness_check(tmp_path: Path) -> None:
    spec = load(tmp_path, BASE.replace('ready = "READY"\n', "")).container
    assert spec is not None and spec.ready_port is True


@pytest.mark.parametrize("old, new, message", [
    ('image = "example/btp:1"', 'image = ""', "image must be an image reference"),
    ("ports = [7768]", "ports = []", "ports must be a non-empty list"),
    ("ports = [7768]", "ports = [70000]", "ports must be a non-empty list"),
    ("ports = [7768]", "ports = [7768, 7768]", "lists a port twice"),
    ('roles = ["server"]', 'roles = ["client"]', "roles does not list 'server'"),
    ('ready = "READY"', 'ready = "("', "ready is not a valid regex"),
    ('ready = "READY"', "ready_port = false", "no readiness check"),
    ('ready = "READY"', 'ready = "READY"\nready_timeout = 0', "ready_timeout must be a positive number"),
    ('outputs = { node_id = "id" }', 'outputs = { port = "port" }', "outputs cannot set 'port'"),
    ('writable = { "/out" = "{workdir}/out" }', 'writable = { "out" = "{workdir}/out" }',
     "must be an absolute path in the container"),
    ('writable = { "/out" = "{workdir}/out" }', 'writable = { "/run/secrets/token" = "{workdir}/t" }',
     "in both mounts and writable"),
    ('ready = "READY"', 'ready = "READY"\ncredential_env = { TOKEN = "passcode" }',
     "names credential 'passcode', which the target does not have"),
    ('ready = "READY"', 'ready = "READY"\nvolumes = ["/x"]', r"unknown field\(s\) \['volumes'\]"),
    ("[targets.node.container]", '[targets.node.launch]\nserver = "x --port {port}"\n\n[targets.node.container]',
     r"has both \[launch\] and \[container\]"),
])
def test_invalid_container_tables_name_the_field(tmp_path: Path, old: str, new: str, message: str) -> None:
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
    text = resources.files("conformance.targets").joinpath("containers.toml").read_text(encoding="utf-8")
    targets = load_targets_file("containers.toml", text)
    protocols = {t.protocol for name, t in targets.items() if name.startswith("container-reference-")}
    assert protocols == {"ssb", "btp", "stomp", "ripp", "ripplehost"}
    assert {"container-ssb-server", "container-ilp-plugin-btp"} <= set(targets)
    assert all(t.container is not None and t.launch is None for t in targets.values())
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert "targets/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["conformance"]
