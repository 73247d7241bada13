"""Small synthetic suites run by the conformance plugin, for testing the
harness's own mechanics (prerequisites, blocked, preflight, run deadline)
without a real protocol: a listener stands in for the target, and each case's
verdict is written into its body."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass

from conformance.runner.session import PYTEST_PLUGIN_ARGS
from pathlib import Path

from .cli_runner import REPO_ROOT


class Listener:
    """Accepts TCP connections and holds them open without a byte: reachable
    for the preflight, silent for any case that reads. With ``greeting``,
    each connection gets those bytes and nothing more: a target that
    answers, too little (not the unresponsive one the harness gives up on)."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClosedPort:
    """A loopback port that refuses connections for as long as it is held:
    bound, never listening. Released at once, a port could be taken by
    another test's listener in the meantime and the target become reachable."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def __enter__(self) -> "ClosedPort":
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def targets_file(
    tmp_path: Path,
    port: int,
    name: str = "fake",
    roles: str = '["server"]',
    protocol: str = "stomp",
) -> Path:
    path = tmp_path / "targets.toml"
    path.write_text(
        textwrap.dedent(f"""
        [targets.{name}]
        implementation = "fake-impl"
        version = "9.9"
        protocol = "{protocol}"
        roles = {roles}
        host = "127.0.0.1"
        port = {port}
    """)
    )
    return path


def write_suite(tmp_path: Path, body: str) -> Path:
    """A suite folder holding one test file with ``body`` (the requirement
    marker and ``pytest`` are imported)."""
    suite = tmp_path / "fakesuite"
    suite.mkdir(exist_ok=True)
    (suite / "test_fake.py").write_text(
        "import pytest\nfrom conformance.core.requirements import requirement\n\n"
        + textwrap.dedent(body)
    )
    return suite


@dataclass
class SuiteRun:
    code: int
    output: str
    run_dir: Path

    @property
    def records(self) -> list[dict]:
        path = self.run_dir / "results.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def by_case(self) -> dict[str, dict]:
        return {r["case_id"]: r for r in self.records}


def run_suite(
    tmp_path: Path,
    suite: Path,
    targets: Path,
    *extra: str,
    target: str = "fake",
    timeout: float = 120,
) -> SuiteRun:
    """pytest with the plugin, as `conformance certify` runs it."""
    run_dir = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        *PYTEST_PLUGIN_ARGS,
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(suite.parent),
        "-c",
        os.devnull,
        "--targets-file",
        str(targets),
        "--target",
        target,
        "--run-dir",
        str(run_dir),
        "--run-id",
        "test-run",
        "--deadline",
        "1",
        "--progress",
        "-rA",
        "--alluredir",
        str(run_dir / "allure-results"),
        "--junitxml",
        str(run_dir / "junit.xml"),
        *extra,
    ]
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    started = time.monotonic()
    completed = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env
    )
    assert time.monotonic() - started < timeout
    return SuiteRun(completed.returncode, completed.stdout + completed.stderr, run_dir)
