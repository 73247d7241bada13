"""Every built-in target's programs accept what the harness puts in their
placeholders (issue 22, item 3: the SSB suite passed ``--timeout 6.0`` and
scripts/ssb-server.sh, which takes digits only, refused it, so ssb-server's
client never started).

For each command of every target in conformance/targets/builtin.toml and
containers.toml (launch and container commands, adapters), the command is
expanded by a TargetRuntime with the values the suites pass (numbers of the
types PLACEHOLDER_TYPES gives, which the runtime checks at every launch, so
these value sets are checked by the same expansion) and handed to the
program that reads it: the reference nodes' and the STOMP client adapters'
argparse parsers and coilmq's click command in-process;
scripts/ssb-server.sh run up to its first node call (a stub ``node`` notes
that the arguments passed the script's checks); the Node.js peers run until
their arguments are parsed (a preload ends them at the first turn of the
event loop); the OCaml RIPP peer run against a listener that hangs up (an
argument it refuses exits 2 at once). Programs not installed here (the npm
packages, the OCaml build) are skipped with the reason. Also: every
placeholder these targets use is documented in docs/targets.md, with the
type PLACEHOLDER_TYPES gives it."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from conformance.core.target_commands import PLACEHOLDER
from conformance.core.targets import (
    PLACEHOLDER_TYPES,
    REPO_ROOT,
    Target,
    TargetError,
    TargetRuntime,
    builtin_targets,
    client_timeout,
    load_targets_file,
)
from conformance.interop.ripp.test_exchange import CLIENT_TIMEOUT as INTEROP_RIPP_TIMEOUT
from conformance.interop.ssb.test_legacy_replication import (
    CLIENT_TIMEOUT as INTEROP_SSB_LEGACY_TIMEOUT,
)
from conformance.suites.ripp.test_client import WATCH_SECONDS
from conformance.suites.ripplehost.conftest import CLIENT_TIMEOUT as RIPPLEHOST_CLIENT_TIMEOUT
from conformance.suites.ripplehost.conftest import DEFAULT_CLIENT_MESSAGES
from conformance.suites.stomp.client_server import CLIENT_TIMEOUT as STOMP_CLIENT_TIMEOUT
from conformance.suites.stomp.client_server import make_messages, manifest_text, new_node_id
from reference_impl.ssb.keys import Keypair

CONTAINERS_FILE = REPO_ROOT / "conformance" / "targets" / "containers.toml"
TARGETS: dict[str, Target] = {**builtin_targets(), **load_targets_file(CONTAINERS_FILE)}

SAMPLES: dict[str, list[Any]] = {
    # SSB and RIPP: client_timeout(--deadline), certify's default 3, the
    # tests' 1, and fractions; the other suites' and interop's constants.
    "client_timeout": [client_timeout(d) for d in (3.0, 1.0, 2.5, 0.5)]
    + [
        RIPPLEHOST_CLIENT_TIMEOUT,
        STOMP_CLIENT_TIMEOUT,
        INTEROP_RIPP_TIMEOUT,
        INTEROP_SSB_LEGACY_TIMEOUT,
    ],
    # BTP's launched_client (stay=10.0) and interop (0); RIPP's (0.0, 2.0,
    # WATCH_SECONDS + 2).
    "client_stay": [10.0, 0.0, 2.0, WATCH_SECONDS + 2, 0],
    # RIPP's launched_producer(count=...).
    "count": [3, 0, 1, 4, 2],
}
"""The numeric values the suites pass; the listener ports and the server's
port are added per run. One expansion per position (shorter lists wrap)."""
ROUNDS = max(len(values) for values in SAMPLES.values())

TYPE_NAMES = {"whole number": int, "number": float, "text": None, "path": None}
"""docs/targets.md's type column -> PLACEHOLDER_TYPES (None: not a number)."""

OCAML_PEER = REPO_ROOT / "interop" / "ripp-ocaml" / "_build" / "default" / "bin" / "ripp_peer.exe"
NODE_DIR = REPO_ROOT / "interop" / "node"


# --- what the targets use ----------------------------------------------------------------------


def commands(target: Target) -> list[tuple[str, tuple[str, ...], str | None, tuple[str, ...]]]:
    """(what, argv template, image or None, entrypoint override) of every
    command the target defines."""
    out: list[tuple[str, tuple[str, ...], str | None, tuple[str, ...]]] = []
    if target.launch is not None:
        for role in ("server", "client"):
            if getattr(target.launch, role):
                out.append((f"launch.{role}", getattr(target.launch, role), None, ()))
    spec = target.container
    if spec is not None:
        if spec.serves:
            out.append(("container", spec.command, spec.image, ()))
        if spec.client is not None:
            out.append(
                ("container.client", spec.client.command, spec.client.image, spec.client.entrypoint)
            )
    for name, argv in target.adapters.items():
        out.append((f"adapters.{name}", argv, None, ()))
    return out


def texts(target: Target) -> Iterator[str]:
    """Every field of the target that the harness expands."""
    for _, argv, _, _ in commands(target):
        yield from argv
    if target.launch is not None:
        yield from target.launch.env.values()
        yield target.launch.cwd
    for spec in (target.container, target.container.client if target.container else None):
        if spec is not None:
            yield from spec.env.values()
            yield from spec.mounts.values()
            yield from spec.writable.values()
    if target.container is not None:
        yield target.container.url
    yield from (ref.ref for ref in target.credentials.values() if ref.kind == "file")


def documented_types() -> dict[str, type | None]:
    """Placeholder -> type, from the table of docs/targets.md."""
    found: dict[str, type | None] = {}
    for line in (REPO_ROOT / "docs" / "targets.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`{") and cells[1] in TYPE_NAMES:
            for name in re.findall(r"`\{(\w+)\}`", cells[0]):
                found[name] = TYPE_NAMES[cells[1]]
    return found


def test_every_placeholder_is_documented_with_its_type():
    documented = documented_types()
    assert {
        name: kind for name, kind in documented.items() if kind is not None
    } == PLACEHOLDER_TYPES
    unknown = {}
    for target in TARGETS.values():
        own = (
            set(target.params)
            | set(target.launch.outputs if target.launch else {})
            | set(target.container.outputs if target.container else {})
            | {f"{c}_file" for c in target.credentials}
        )
        for text in texts(target):
            for name in PLACEHOLDER.findall(text):
                if name not in documented and name not in own:
                    unknown.setdefault(target.name, set()).add(name)
    assert not unknown, f"placeholders not in docs/targets.md's table: {unknown}"


def test_a_value_of_another_type_is_refused_at_launch(tmp_path):
    runtime = TargetRuntime(TARGETS["reference-ssb"], tmp_path, tmp_path)
    with pytest.raises(
        TargetError,
        match=r"placeholder \{client_timeout\} takes a whole number, but the harness "
        r"passed 6\.0",
    ):
        runtime._expand_text("--timeout {client_timeout}", {"client_timeout": 6.0})
    with pytest.raises(
        TargetError, match=r"\{client_stay\} takes a number, but the harness passed '2'"
    ):
        runtime._expand_text("--stay {client_stay}", {"client_stay": "2"})
    timeout = client_timeout(3.0)
    assert isinstance(timeout, int) and timeout >= 5
    assert (
        runtime._expand_text(
            "{client_timeout} {client_stay} {count}",
            {"client_timeout": timeout, "client_stay": 0.5, "count": 0},
        )
        == f"{timeout} 0.5 0"
    )


# --- the values ---------------------------------------------------------------------------------


class Listener:
    """A TCP listener that holds every connection open (``hang_up``: closes
    it at once), for clients that connect as they parse."""

    def __init__(self, hang_up: bool) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.hang_up = hang_up
        self.held: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.hang_up:
                conn.close()
            else:
                self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def listeners():
    holding, hanging_up = Listener(False), Listener(True)
    yield holding, hanging_up
    holding.close()
    hanging_up.close()


def client_values(protocol: str, work: Path, peer_port: int, round_: int) -> dict[str, Any]:
    """What the protocol's suite passes to a launched client, as its
    conftest builds it (conformance/suites/<protocol>/)."""
    numbers = {name: values[round_ % len(values)] for name, values in SAMPLES.items()}
    peer = {"peer_host": "127.0.0.1", "peer_port": peer_port}
    if protocol == "ssb":
        feed = Keypair.generate().feed_id
        return {
            **peer,
            "peer_public_key": feed,
            "feed": feed,
            "client_timeout": numbers["client_timeout"],
        }
    if protocol == "btp":
        return {
            **peer,
            "peer_url": f"ws://127.0.0.1:{peer_port}/",
            "client_stay": numbers["client_stay"],
            "send_message": "conformance:hello",
        }
    if protocol == "ripp":
        return {
            **peer,
            "source_id": "conformance-producer",
            "count": numbers["count"],
            "client_stay": numbers["client_stay"],
            "client_timeout": numbers["client_timeout"],
        }
    if protocol == "ripplehost":
        messages = work / "ripplehost-client-1.json"
        messages.write_text(json.dumps(list(DEFAULT_CLIENT_MESSAGES)))
        return {**peer, "messages_file": messages, "client_timeout": numbers["client_timeout"]}
    if protocol == "stomp":
        manifest, messages = work / "stomp.toml", work / "messages.jsonl"
        manifest.write_text(manifest_text("127.0.0.1", peer_port))
        messages.write_text("".join(json.dumps(m, sort_keys=True) + "\n" for m in make_messages()))
        return {
            "manifest_file": manifest,
            "node_id": new_node_id(random.Random(round_)),
            "messages_file": messages,
            "client_timeout": numbers["client_timeout"],
        }
    raise AssertionError(f"no client values for {protocol}")


def runtime_for(target: Target, work: Path, port: int) -> TargetRuntime:
    """A runtime with what a started node and the run's PKI would give:
    the outputs as params (a sample of each), the TLS files, the port."""
    runtime = TargetRuntime(target, work, work)
    runtime.port = port
    samples = {
        "public_key": Keypair.generate().feed_id,
        "secret_file": str(work / "secret"),
        "manifest_file": str(work / "node-stomp.toml"),
        "hostname": "reference.ripple.test",
        "amqp_port": "5672",
        "adapter_port": "61613",
        "url": f"ws://127.0.0.1:{port}/",
    }
    outputs = dict(target.launch.outputs if target.launch else {})
    outputs.update(target.container.outputs if target.container else {})
    for param in outputs:
        if param not in ("port", "host", "url"):
            runtime.params[param] = samples[param]
    for name in (
        "ca_file",
        "server_cert_file",
        "server_key_file",
        "client_cert_file",
        "client_key_file",
    ):
        runtime.params.setdefault(name, str(work / f"{name}.pem"))
    return runtime


# --- the programs -------------------------------------------------------------------------------


def dockerfile_instruction(image: str, instruction: str) -> list[str]:
    """ENTRYPOINT or CMD (exec form) of docker/<name>/Dockerfile, the
    recipe of image conformance/<name>:dev."""
    name = image.split("/", 1)[1].split(":", 1)[0]
    text = (
        (REPO_ROOT / "docker" / name / "Dockerfile")
        .read_text(encoding="utf-8")
        .replace("\\\n", " ")
    )
    match = re.search(rf"^{instruction}\s+(\[.*\])\s*$", text, re.MULTILINE)
    return json.loads(match.group(1)) if match else []


def in_image(
    image: str, entrypoint: tuple[str, ...], command: list[str], mounts: dict[str, str]
) -> list[str]:
    """The argv a container runs (entrypoint without tini, then the command
    or the image's CMD), its paths mapped to the checkout's."""
    argv = list(entrypoint) or dockerfile_instruction(image, "ENTRYPOINT")
    if argv[:2] == ["/usr/local/bin/tini", "--"]:
        argv = argv[2:]
    argv += command or dockerfile_instruction(image, "CMD")
    mapped = []
    for arg in argv:
        if arg in mounts:
            arg = mounts[arg]
        elif arg.startswith("/opt/conformance-node/"):
            arg = str(REPO_ROOT / arg[len("/opt/conformance-node/") :])
        elif arg.startswith("/opt/conformance-rabbitmq/"):
            arg = str(REPO_ROOT / arg[len("/opt/conformance-rabbitmq/") :])
        elif arg.startswith("/opt/conformance-swpt/"):
            arg = str(REPO_ROOT / arg[len("/opt/conformance-swpt/") :])
        elif arg == "/opt/rabbitmq-tools/bin/python":  # the rabbitmq image's tools venv (pika)
            arg = sys.executable
        elif arg == "/usr/local/bin/ripp_peer":
            arg = str(OCAML_PEER)
        mapped.append(arg)
    return mapped


@contextlib.contextmanager
def refusal(what: str) -> Iterator[io.StringIO]:
    """An argparse or click parse that must not exit: its SystemExit, with
    what it printed, fails the test."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            yield err
    except SystemExit as exc:
        pytest.fail(f"{what} refused its arguments (exit {exc.code}): {err.getvalue()}")


def parse_python_module(module: str, args: list[str], what: str) -> None:
    parser = importlib.import_module(f"{module}.__main__").build_parser()
    with refusal(what):
        parser.parse_args(args)


def load_script(path: Path) -> Any:
    """A script beside the suites (interop/stomp/...), imported from its path."""
    name = f"placeholder_check_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
        del sys.modules[name]
    return module


def parse_python_script(path: Path, args: list[str], what: str) -> None:
    if path.name in ("stomppy_client.py", "stompman_client.py"):
        contract = load_script(path.parent / "client_contract.py")
        with refusal(what):
            try:
                contract.parse_args(args, path.name, "")
            except contract.UsageError as exc:
                pytest.fail(f"{what} refused its arguments: {exc}")
    elif path.name == "amqp_accepted.py":
        pytest.importorskip("pika")
        module = load_script(path)
        called = []
        module.read = lambda *a, **k: called.append(a or k) or 0
        with refusal(what):
            module.main(args)
        assert called, f"{what}: main did not get as far as reading"
    elif path.name == "swpt_node.py":
        # swpt_stomp's launcher: its argparse takes the arguments, up to the
        # command it would run (which starts RabbitMQ and swpt_stomp).
        module = load_script(path)
        called = []
        for name in ("cmd_server", "cmd_accepted", "cmd_client"):
            setattr(module, name, lambda args, name=name: called.append((name, args)) or 0)
        with refusal(what):
            module.main(args)
        assert called, f"{what}: main did not get as far as its command"
    elif path.name == "activemq_accepted.py":
        module = load_script(path)
        called = []
        module.browse = lambda *a, **k: called.append(a or k) or []
        with refusal(what):
            module.main(args)
        assert called, f"{what}: main did not get as far as browsing"
    else:
        pytest.fail(f"{what}: no parser check for the Python script {path}")


def parse_coilmq(args: list[str], what: str) -> None:
    coilmq = pytest.importorskip("coilmq.start")
    import click

    try:
        coilmq.main.make_context("coilmq", list(args))
    except click.ClickException as exc:
        pytest.fail(f"{what} refused its arguments: {exc.format_message()}")


def run_ssb_server_script(script: Path, args: list[str], work: Path, what: str) -> None:
    """scripts/ssb-server.sh from a copy of its folders with a stub `node`:
    its arguments are good when it gets as far as its first node call
    (`node ssb-home.js init ...`), after every check of its own."""
    root = work / "ssb-server-copy"
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy(script, root / "scripts" / "ssb-server.sh")
    # What it sources beside itself ($(dirname "${BASH_SOURCE[0]}")/lib), as
    # the images carry it (scripts/docker-build-images.sh copies scripts/lib).
    shutil.copytree(script.parent / "lib", root / "scripts" / "lib", dirs_exist_ok=True)
    (root / "interop" / "node" / "node_modules" / "ssb-server").mkdir(parents=True, exist_ok=True)
    (root / "interop" / "node" / "node_modules" / "ssb-server" / "bin.js").touch()
    stub = root / "bin" / "node"
    stub.parent.mkdir(exist_ok=True)
    marker = work / "reached-node-init"
    marker.unlink(missing_ok=True)
    stub.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -e ] && { echo 40123; exit 0; }\n'
        f'case "$1 $2" in *ssb-home.js\\ init) echo "$@" > "{marker}"; exit 1 ;; esac\n'
        "exit 3\n"
    )
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:/usr/bin:/bin", "TMPDIR": str(work)}
    run = subprocess.run(
        ["bash", str(root / "scripts" / "ssb-server.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert marker.is_file(), (
        f"{what} refused its arguments (exit {run.returncode}): {run.stderr[-2000:]}"
    )


def run_node(argv: list[str], what: str, work: Path) -> None:
    """A Node.js program until its arguments are parsed: a preload ends it
    at the first turn of the event loop (exit 0); an argument it refuses
    ends it before that (exit 2 and its usage error)."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    modules = {
        "ilp-plugin-btp-peer.js": "ilp-plugin-btp",
        "shs-replicate.js": "secret-handshake",
        "ilp-plugin-btp.sh": "ilp-plugin-btp",
        "stompit-client.js": "stompit",
        "ssb-db2.sh": "ssb-db2/node_modules/ssb-db2",
    }
    package = modules[Path(argv[0] if argv[0] != "node" else argv[1]).name]
    if "/" in package:  # a stack of its own under interop/node/<stack>/
        installed = NODE_DIR / package / "package.json"
    else:
        installed = NODE_DIR / "node_modules" / package / "package.json"
    if not installed.is_file():
        pytest.skip(f"the npm package {package} is not installed (scripts/install-node-deps.sh)")
    preload = work / "exit-after-parse.js"
    preload.write_text("setImmediate(() => process.exit(0))\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NODE_OPTIONS": f"--require={preload}"}
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=REPO_ROOT)
    assert run.returncode == 0, (
        f"{what} refused its arguments (exit {run.returncode}): {run.stderr[-2000:]}"
    )


def run_ocaml_peer(args: list[str], what: str) -> None:
    if not OCAML_PEER.is_file():
        pytest.skip(f"the OCaml RIPP peer is not built ({OCAML_PEER}; scripts/build-ocaml-ripp.sh)")
    run = subprocess.run([str(OCAML_PEER), *args], capture_output=True, text=True, timeout=60)
    assert run.returncode != 2, f"{what} refused its arguments: {run.stderr[-2000:]}"


def check(argv: list[str], what: str, work: Path, typed: bool) -> bool:
    """Hand ``argv`` to the program that reads it; False when the program
    is one the test cannot run here (RabbitMQ's script, docker exec), or a
    server of Node.js or OCaml whose placeholders are all text (it would
    listen for real)."""
    program = Path(argv[0])
    if argv[0] == sys.executable and argv[1] == "-m":
        parse_python_module(argv[2], argv[3:], what)
    elif argv[0] == sys.executable and argv[1] == "-c" and "coilmq" in argv[2]:
        parse_coilmq(argv[3:], what)
    elif argv[0] == sys.executable and argv[1].endswith(".py"):
        parse_python_script(Path(argv[1]), argv[2:], what)
    elif program.name == "reference-node":
        parse_python_module(f"reference_impl.{argv[1]}", argv[2:], what)
    elif program.name == "ssb-server.sh":
        run_ssb_server_script(program, argv[1:], work, what)
    elif typed and (
        program.name in ("ilp-plugin-btp.sh", "ssb-db2.sh")
        or (argv[0] == "node" and argv[1].endswith(".js"))
    ):
        run_node(argv, what, work)
    elif typed and program.name in ("ocaml-ripp-peer.sh", OCAML_PEER.name):
        run_ocaml_peer(argv[1:], what)
    else:
        return False
    return True


CASES = [(name, what) for name, target in TARGETS.items() for what, _, _, _ in commands(target)]


@pytest.mark.parametrize(("name", "what"), CASES, ids=[f"{n}-{w}" for n, w in CASES])
def test_the_program_accepts_what_the_suites_pass(tmp_path, listeners, name, what):
    target = TARGETS[name]
    _, template, image, entrypoint = next(c for c in commands(target) if c[0] == what)
    holding, hanging_up = listeners
    # The OCaml peer would wait out its timeout on a silent listener; the
    # Node.js ones would fail at once on one that hangs up.
    ocaml = (
        image == "conformance/ocaml-ripp:dev"
        or bool(template)
        and template[0].endswith("ocaml-ripp-peer.sh")
    )
    peer = hanging_up if ocaml else holding
    typed = [n for part in template for n in PLACEHOLDER.findall(part) if n in PLACEHOLDER_TYPES]
    checked = False
    for round_ in range(ROUNDS if typed else 1):
        work = tmp_path / f"round-{round_}"
        work.mkdir()
        runtime = runtime_for(target, work, holding.port)
        extra: dict[str, Any] = {}
        if what.endswith("client"):
            extra = client_values(target.protocol, work, peer.port, round_)
        elif what == "container":
            extra = {"container_port": target.container.ports[0]}
        elif target.container is not None:
            extra = {"container_id": "0123456789ab"}
        # The same expansion as a launch: a value of the wrong type is refused here.
        argv = [runtime._expand_text(part, extra) for part in template]
        for part, expanded in zip(template, argv):
            for placeholder in PLACEHOLDER.findall(part):
                if PLACEHOLDER_TYPES.get(placeholder) is int and part == f"{{{placeholder}}}":
                    assert re.fullmatch(r"\d+", expanded), (placeholder, expanded)
        if image is not None:
            spec = target.container.client if what == "container.client" else target.container
            mounts = {
                inside: runtime._expand_text(host, extra) for inside, host in spec.mounts.items()
            }
            argv = in_image(image, entrypoint, argv, mounts)
        checked = check(argv, f"{name} {what} ({' '.join(argv)})", work, bool(typed))
        if not checked:
            break
    if not checked:
        # Programs the test cannot run here (RabbitMQ's script, docker exec)
        # get text placeholders only: paths, hosts, ids.
        assert not typed, f"{name} {what} takes {typed}: add a check for {argv[0]}"


def test_the_reported_case_ssb_server_refused_a_fractional_timeout(tmp_path, listeners):
    """The bug behind issue 22's example, kept visible: the check above
    would catch a suite passing 6.0 again."""
    script = REPO_ROOT / "scripts" / "ssb-server.sh"
    feed = Keypair.generate().feed_id
    args = [
        "replicate",
        "--peer-host",
        "127.0.0.1",
        "--peer-port",
        str(listeners[0].port),
        "--peer-public-key",
        feed,
        "--feed",
        feed,
    ]
    run_ssb_server_script(script, args + ["--timeout", "6"], tmp_path, "ssb-server.sh --timeout 6")
    with pytest.raises(
        AssertionError, match=r"(?s)refused its arguments \(exit 1\).*bad --timeout 6\.0"
    ):
        run_ssb_server_script(
            script, args + ["--timeout", "6.0"], tmp_path, "ssb-server.sh --timeout 6.0"
        )
