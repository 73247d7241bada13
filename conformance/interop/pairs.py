"""`conformance interop --all`: every client-role target against every
server-role target of the same protocol, and the summary table.

A protocol takes part when it has interop cases (``conformance/interop/<p>/
test_*.py``). A client is a target with a ``launch.client`` command; a
server a target playing the server role. A pair is skipped, with the reason
printed, when a side's tools are not installed here (:func:`missing_tools`):
the nightly runs wherever the tools are, and a machine without RabbitMQ
still runs every other pair.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.targets import REPO_ROOT, Target
from conformance.core.run_folder import RunFolder

INTEROP_DIR = Path(__file__).resolve().parent

# What a launch command needs beyond its own file, by the file it runs
# (a path under {repo}): the installs the project's scripts make. Each entry
# is (what, check), check a path that must exist (relative to the repo or
# absolute), "cmd:NAME" for a program on PATH, or "py:MODULE" for a module
# importable by the harness's Python.
REQUIREMENTS: dict[str, list[str]] = {
    "scripts/rabbitmq.sh": ["/usr/lib/rabbitmq/bin/rabbitmq-server", "py:pika"],
    "scripts/ssb-server.sh": ["cmd:node", "interop/node/node_modules/ssb-server/bin.js"],
    "scripts/ilp-plugin-btp.sh": [
        "cmd:node",
        "interop/node/node_modules/ilp-plugin-btp/package.json",
    ],
    "interop/node/shs-replicate.js": ["cmd:node", "interop/node/node_modules/secret-handshake"],
    "interop/stomp/stomppy_client.py": ["py:stomp"],
    "interop/stomp/stompman_client.py": ["py:stompman"],
    # Builds itself with dune on first use (scripts/build-ocaml-ripp.sh).
    "scripts/ocaml-ripp-peer.sh": ["cmd:dune|interop/ripp-ocaml/_build/default/bin/ripp_peer.exe"],
}
HINTS = {
    "scripts/rabbitmq.sh": "scripts/install-rabbitmq.sh (or scripts/setup.sh --rabbitmq)",
    "scripts/ssb-server.sh": "scripts/install-node-deps.sh",
    "scripts/ilp-plugin-btp.sh": "scripts/install-node-deps.sh",
    "interop/node/shs-replicate.js": "scripts/install-node-deps.sh",
    "scripts/ocaml-ripp-peer.sh": "scripts/install-ocaml.sh",
    # PyPI packages of the test extra: certify.sh's base install lacks them.
    "interop/stomp/stomppy_client.py": "scripts/setup.sh --test",
    "interop/stomp/stompman_client.py": "scripts/setup.sh --test",
}


def _present(check: str) -> bool:
    for alternative in check.split("|"):
        if alternative.startswith("cmd:"):
            ok = shutil.which(alternative[4:]) is not None
        elif alternative.startswith("py:"):
            ok = importlib.util.find_spec(alternative[3:]) is not None
        else:
            path = Path(alternative)
            ok = (path if path.is_absolute() else REPO_ROOT / path).exists()
        if ok:
            return True
    return False


def _describe(check: str) -> str:
    parts = []
    for alternative in check.split("|"):
        if alternative.startswith("cmd:"):
            parts.append(f"program {alternative[4:]!r} on PATH")
        elif alternative.startswith("py:"):
            parts.append(f"Python module {alternative[3:]!r}")
        else:
            parts.append(alternative)
    return " or ".join(parts)


def missing_tools(target: Target, role: str) -> str | None:
    """Why ``target`` cannot be launched in ``role`` here, or None. Only
    launch commands are checked; a target reached at a fixed address is
    the user's to run."""
    launch = target.launch
    argv = getattr(launch, role, ()) if launch else ()
    if not argv:
        return None
    for word in argv[:2]:
        if not word.startswith("{repo}/"):
            continue
        relative = word[len("{repo}/") :]
        if not (REPO_ROOT / relative).exists():
            return f"{relative} is missing"
        missing = [_describe(c) for c in REQUIREMENTS.get(relative, []) if not _present(c)]
        if missing:
            hint = HINTS.get(relative)
            return f"needs {', '.join(missing)}" + (f" (install: {hint})" if hint else "")
        return None
    program = argv[0]
    if not program.startswith("{") and shutil.which(program) is None:
        return f"program {program!r} is not on PATH"
    return None


def interop_protocols() -> list[str]:
    return sorted(p.name for p in INTEROP_DIR.iterdir() if p.is_dir() and any(p.glob("test_*.py")))


@dataclass
class Pair:
    client: str
    server: str
    protocol: str
    client_implementation: str = ""
    server_implementation: str = ""
    skipped: str | None = None
    error: str | None = None
    """The pair's preflight error (a side could not be started)."""
    counts: dict[str, int] = field(default_factory=dict)
    must_not_passed: list[str] = field(default_factory=list)
    partial: bool = False
    """``--case`` left some of the protocol's interop cases out: the
    verdict holds for the selected cases only."""

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "not run"
        if not self.counts or not sum(self.counts.values()):
            return "no result"
        return "interoperable" if not self.must_not_passed else "NOT interoperable"


def plan_pairs(targets: dict[str, Target], protocols: list[str]) -> list[Pair]:
    """Every (client, server) of each protocol, skipped ones with the reason."""
    pairs = []
    for protocol in protocols:
        of_protocol = sorted(
            (t for t in targets.values() if t.protocol == protocol), key=lambda t: t.name
        )
        clients = [t for t in of_protocol if "client" in t.roles and t.can_launch("client")]
        servers = [t for t in of_protocol if "server" in t.roles]
        for client in clients:
            for server in servers:
                pair = Pair(
                    client.name, server.name, protocol, client.implementation, server.implementation
                )
                why = [f"client {client.name}: {r}" for r in [missing_tools(client, "client")] if r]
                why += [
                    f"server {server.name}: {r}" for r in [missing_tools(server, "server")] if r
                ]
                pair.skipped = "; ".join(why) or None
                pairs.append(pair)
    return pairs


def tally(pair: Pair, records: list[dict[str, Any]]) -> None:
    """Fill the pair's counts from its session's result records."""
    counts = {"passed": 0, "failed": 0, "error": 0, "blocked": 0, "not_applicable": 0}
    for rec in records:
        outcome = rec.get("outcome", "error")
        counts[outcome] = counts.get(outcome, 0) + 1
        if rec.get("level") == "MUST" and outcome not in ("passed", "not_applicable"):
            pair.must_not_passed.append(f"{rec.get('case_id')} ({outcome})")
    pair.counts = counts


def table(pairs: list[Pair]) -> str:
    """The client x server summary, one line per pair."""
    width_c = max([len("client")] + [len(p.client) for p in pairs])
    width_s = max([len("server")] + [len(p.server) for p in pairs])
    lines = [
        f"{'client':<{width_c}}  {'server':<{width_s}}  {'protocol':<10} {'passed':>6} {'failed':>6} "
        f"{'error':>5} {'blocked':>7} {'n/a':>4}  verdict"
    ]
    for p in pairs:
        c = p.counts
        if p.skipped or p.error:
            numbers = f"{'-':>6} {'-':>6} {'-':>5} {'-':>7} {'-':>4}"
        else:
            numbers = (
                f"{c.get('passed', 0):>6} {c.get('failed', 0):>6} {c.get('error', 0):>5} "
                f"{c.get('blocked', 0):>7} {c.get('not_applicable', 0):>4}"
            )
        reason = (
            f": {p.skipped}"
            if p.skipped
            else f": {p.error}"
            if p.error
            else " (partial run)"
            if p.partial
            else ""
        )
        lines.append(
            f"{p.client:<{width_c}}  {p.server:<{width_s}}  {p.protocol:<10} {numbers}  {p.verdict}{reason}"
        )
    return "\n".join(lines)


def write_summary(run_dir: Path, run_id: str, pairs: list[Pair], duration_s: float) -> Path:
    path = RunFolder(run_dir).interop_summary
    data = {
        "run_id": run_id,
        "kind": "interop-all",
        "duration_s": round(duration_s, 3),
        "pairs": [dict(asdict(p), verdict=p.verdict) for p in pairs],
        "interoperable": sum(p.verdict == "interoperable" for p in pairs),
        "not_interoperable": sum(
            p.verdict in ("NOT interoperable", "not run", "no result") for p in pairs
        ),
        "skipped": sum(p.verdict == "skipped" for p in pairs),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
