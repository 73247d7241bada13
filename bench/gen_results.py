#!/usr/bin/env python3
"""Synthetic ``results.jsonl`` run directories, shaped like real nightly runs.

Why: the aggregation (``conformance ingest`` / ``conformance matrix``) must
be measured and tested at sizes no real machine here produces (1 to 10
million result rows), on data whose quirks match the real thing: case ids
``protocol.component.role.rule`` per protocol, MUST/SHOULD/MAY levels,
implementations released in new versions over time, bugs that come and go
with versions, capabilities an implementation lacks (``not_applicable``),
flaky cases, rare harness errors, cases blocked by a failed prerequisite
(``blocked``, naming it), interop runs in which one implementation
plays client and another server (``peer_implementation`` set), runs killed
half-way (no ``summary.json``, a torn last line) and the odd malformed line.

Layout written (the same as ``conformance certify`` writes)::

    OUT/runs/<run_id>/results.jsonl
    OUT/runs/<run_id>/summary.json        (finished runs only)
    OUT/manifest.json                     (what was written: counts to check against)

Each night every implementation is certified in one run (its current and
previous release, ``--versions`` of them), and each protocol gets one interop
run pairing its implementations in both orientations.

Fast: behaviour is drawn with NumPy per (implementation, version) block and
lines are assembled from precomputed per-case fragments; nights are split
over worker processes. Deterministic for a given ``--seed`` and size.

    bench/gen_results.py --out /tmp/gen --rows 1000000
    bench/gen_results.py --out /tmp/gen --implementations 20 --cases 400 --nights 30
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance.core.run_folder import RunFolder  # noqa: E402 (after the sys.path line)

HARNESS_VERSION = "0.1.0"
FIRST_NIGHT = datetime(2026, 1, 1, 2, 0, 0, tzinfo=timezone.utc)

# Per protocol: spec name, components and a pool of implementation names.
PROTOCOLS: dict[str, dict] = {
    "ssb": {
        "spec": "Scuttlebutt Protocol Guide",
        "components": ["shs", "boxstream", "rpc", "feed", "history", "ebt", "blobs", "gossip"],
        "impls": ["ssb-server", "go-ssb", "ssb-rs", "tildefriends", "manyverse-core", "patchql"],
    },
    "btp": {
        "spec": "IL-RFC 23 (Bilateral Transfer Protocol 2.0)",
        "components": ["auth", "flow", "transfer", "error", "subprotocol", "framing", "session"],
        "impls": ["rafiki-btp", "ilp-plugin-btp", "btp-go", "interledger-rs", "java-ilp-btp"],
    },
    "stomp": {
        "spec": "STOMP 1.2 specification",
        "components": [
            "frame",
            "connect",
            "subscribe",
            "ack",
            "heartbeat",
            "receipt",
            "transaction",
        ],
        "impls": ["activemq", "rabbitmq-stomp", "artemis", "stompjs-broker", "coilmq"],
    },
    "ripp": {
        "spec": "RIPP draft-02",
        "components": ["session", "payment", "quote", "settlement", "retry", "idempotency"],
        "impls": ["ripp-ref", "ripp-go", "ripp-kotlin", "ripp-node"],
    },
    "ripplehost": {
        "spec": "Ripple host protocol 1.0",
        "components": ["hello", "ledger", "peer", "validation", "squelch", "transaction"],
        "impls": ["rippled", "xrpld-lite", "ripple-host-rs", "clio-host"],
    },
}
VERBS = [
    "rejects",
    "accepts",
    "sends",
    "closes",
    "ends",
    "answers",
    "ignores",
    "keeps",
    "orders",
    "limits",
    "retries",
    "signs",
    "verifies",
    "reports",
    "caps",
    "serves",
]
OBJECTS = [
    "wrong-key",
    "replayed-frame",
    "truncated-header",
    "garbage",
    "empty-body",
    "duplicate-id",
    "unknown-command",
    "large-message",
    "stale-session",
    "bad-signature",
    "missing-field",
    "oversized-frame",
    "out-of-order-seq",
    "expired-token",
    "split-packet",
    "concurrent-requests",
    "zero-length",
    "utf8-names",
    "negative-amount",
    "reconnect",
]
OUTCOMES = np.array(["passed", "failed", "not_applicable", "error", "blocked"])
BLOCKED = 4
"""Index of ``blocked`` in OUTCOMES: a case right after a failed one (its
prerequisite, in catalogue order) is blocked by it some of the time."""
LEVELS = np.array(["MUST", "SHOULD", "MAY"])
FAIL_MESSAGES = [
    "expected the connection to close within 3.0 s, it stayed open",
    "expected an error frame, got a normal response",
    "response carried request id 7, expected 6",
    "peer accepted a forged signature",
    "stream ended without the end-of-stream marker",
]
ERROR_MESSAGES = [
    "target did not start: connection refused on 127.0.0.1",
    "harness error: deadline exceeded while reading hello",
]


BASES = (
    "keyword",
    "keyword",
    "plain-words",
    "wire-format: the frame header layout",
    "profile: rule 3, docs/example-profile.md",
    "erratum: EX-E1 what the network does",
    "inference: a node that does otherwise cannot be read",
)
"""The bases the generated cases' levels rest on, in turn."""


def case_catalogue(protocol: str, count: int, seed: int) -> list[dict]:
    """``count`` distinct case ids for a protocol, with level, role, citation."""
    info = PROTOCOLS[protocol]
    rng = np.random.default_rng([seed, sum(map(ord, protocol))])
    cases, seen = [], set()
    i = 0
    while len(cases) < count:
        comp = info["components"][i % len(info["components"])]
        role = "server" if rng.random() < 0.7 else "client"
        verb, obj = VERBS[rng.integers(len(VERBS))], OBJECTS[rng.integers(len(OBJECTS))]
        base = f"{protocol}.{comp}.{role}.{verb}-{obj}"
        case_id = base if base not in seen else f"{base}-{i}"
        i += 1
        if case_id in seen:
            continue
        seen.add(case_id)
        level = LEVELS[rng.choice(3, p=[0.75, 0.2, 0.05])]
        cases.append(
            {
                "case_id": case_id,
                "role": role,
                "level": str(level),
                # What binds the level (docs/levels.md); from the index, not
                # the generator, so the other draws stay as they were.
                "basis": BASES[i % len(BASES)],
                "citation": f"{info['spec']}, {comp} section {1 + i % 9}.{1 + i % 5} "
                f'("{verb} {obj.replace("-", " ")}")',
            }
        )
    return cases


def implementations(n: int) -> list[tuple[str, str]]:
    """``n`` (implementation, protocol) pairs, spread round-robin over protocols."""
    names = list(PROTOCOLS)
    out = []
    for i in range(n):
        protocol = names[i % len(names)]
        pool = PROTOCOLS[protocol]["impls"]
        k = i // len(names)
        out.append((pool[k] if k < len(pool) else f"{protocol}-impl-{k}", protocol))
    return out


def version_of(impl_index: int, release: int) -> str:
    return f"{1 + impl_index % 3}.{release // 4}.{release % 4}"


class Plan:
    """Everything that does not depend on the night: catalogues, fragments."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.impls = implementations(args.implementations)
        self.catalogues = {p: case_catalogue(p, args.cases, args.seed) for p in PROTOCOLS}
        self.release_every = [5 + (i * 7) % 11 for i in range(len(self.impls))]
        # Per-case JSON fragments in sorted-key order, as ResultWriter writes them.
        self.head = {}
        self.tail = {}
        self._behaviour: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self.lvl = {}
        self.role_i = {}
        for p, cases in self.catalogues.items():
            self.head[p] = [
                f'{{"basis": {json.dumps(c["basis"])}, "case_id": "{c["case_id"]}", '
                f'"citation": {json.dumps(c["citation"])}, "duration_s": '
                for c in cases
            ]
            self.tail[p] = [f'Z", "trace_file": "traces/{c["case_id"]}.txt"}}\n' for c in cases]
            self.lvl[p] = [f'{c["level"]}", "message": ' for c in cases]
            self.role_i[p] = [0 if c["role"] == "server" else 1 for c in cases]
        self.roles = {p: np.array([c["role"] for c in cs]) for p, cs in self.catalogues.items()}
        self.ids = {p: [c["case_id"] for c in cs] for p, cs in self.catalogues.items()}
        # Durations as strings, 0.1 ms steps up to 3 s: formatting by lookup.
        self.dur_table = np.array(
            [f"{x / 10000:.4f}".rstrip("0").rstrip(".") if x else "0.0" for x in range(30000)],
            dtype=object,
        )
        frags = {
            "passed": ['"", "outcome": "passed"'],
            "not_applicable": [
                '"target lacks capability: live-streams", "outcome": "not_applicable"'
            ],
            "failed": [f'{json.dumps(m)}, "outcome": "failed"' for m in FAIL_MESSAGES],
            "error": [f'{json.dumps(m)}, "outcome": "error"' for m in ERROR_MESSAGES],
            # Replaced per line by one naming the case that blocked it (see block()).
            "blocked": ['"blocked by a prerequisite", "outcome": "blocked"'],
        }
        # Indexed by outcome * 5 + variant: the message and outcome part of a line.
        self.outcome_table = np.array(
            [frags[o][w % len(frags[o])] for o in OUTCOMES for w in range(5)], dtype=object
        )

    def behaviour(self, impl_i: int, release: int, protocol: str) -> tuple[np.ndarray, np.ndarray]:
        key = (impl_i, release, protocol)
        if key not in self._behaviour:
            if len(self._behaviour) > 4096:
                self._behaviour.clear()
            self._behaviour[key] = self._draw_behaviour(impl_i, release, protocol)
        return self._behaviour[key]

    def _draw_behaviour(
        self, impl_i: int, release: int, protocol: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per case of this implementation release: base outcome and flakiness.

        A bug belongs to a range of releases (introduced, then fixed), a
        missing capability to the implementation, flakiness to the pair of
        implementation and case; so verdicts change with versions as in life."""
        n = len(self.catalogues[protocol])
        rng_impl = np.random.default_rng([self.args.seed, impl_i, 1])
        na = rng_impl.random(n) < 0.04
        flaky = rng_impl.random(n) < 0.015
        bug_start = rng_impl.integers(0, 40, n)
        bug_len = rng_impl.integers(1, 12, n)
        buggy = (
            (rng_impl.random(n) < 0.05) & (release >= bug_start) & (release < bug_start + bug_len)
        )
        base = np.zeros(n, dtype=np.int8)
        base[buggy] = 1
        base[na] = 2
        return base, flaky & ~na


def night_runs(plan: Plan, night: int) -> list[tuple[str, list[str], bool]]:
    """The runs of one night: (run_id, lines, finished)."""
    args = plan.args
    rng = np.random.default_rng([args.seed, night, 7])
    start_night = FIRST_NIGHT + timedelta(days=night)
    runs = []
    for impl_i, (impl, protocol) in enumerate(plan.impls):
        release = night // plan.release_every[impl_i] + impl_i % 5
        t0 = start_night + timedelta(minutes=3 * impl_i, seconds=int(rng.integers(0, 60)))
        run_id = t0.strftime("%Y%m%dT%H%M%SZ") + "-" + f"{int(rng.integers(0, 2**32)):08x}"
        lines: list[str] = []
        t = np.datetime64(t0.replace(tzinfo=None), "ms")
        for v in range(args.versions):
            rel = max(0, release - v)
            version = version_of(impl_i, rel)
            # One target name per release certified that night: the record
            # key is (run, target, case), so two releases under one name
            # would collapse into one. (-prev, -prev2, ...: with --versions 2
            # the names are those of earlier datasets.)
            target = f"{impl}-{version.rsplit('.', 1)[0]}" + (
                "" if v == 0 else "-prev" if v == 1 else f"-prev{v}"
            )
            base, flaky = plan.behaviour(impl_i, rel, protocol)
            lines += block(
                plan, rng, protocol, impl, version, target, run_id, None, base, flaky, t, None
            )
            t = t + np.timedelta64(90_000, "ms")
        runs.append((run_id, lines, True))
    if args.interop:
        # One interop run per protocol: every ordered pair of its implementations
        # on the interop subset of cases; each side records the role it played.
        by_proto: dict[str, list[int]] = {}
        for i, (_, p) in enumerate(plan.impls):
            by_proto.setdefault(p, []).append(i)
        for pi, (protocol, members) in enumerate(sorted(by_proto.items())):
            if len(members) < 2:
                continue
            t0 = start_night + timedelta(hours=4, minutes=5 * pi, seconds=int(rng.integers(0, 60)))
            run_id = t0.strftime("%Y%m%dT%H%M%SZ") + "-" + f"{int(rng.integers(0, 2**32)):08x}"
            n = len(plan.catalogues[protocol])
            subset = np.arange(0, n, max(1, n // args.interop_cases))[: args.interop_cases]
            roles = plan.roles[protocol][subset]
            t = np.datetime64(t0.replace(tzinfo=None), "ms")
            lines = []
            for a in members:
                for b in members:
                    if a == b:
                        continue
                    # a plays server, b client: server cases are recorded for a
                    # (peer b), client cases for b (peer a).
                    pair_rng = np.random.default_rng([args.seed, a, b, 3])
                    incompatible = pair_rng.random(len(subset)) < 0.06
                    for side, other, role in ((a, b, "server"), (b, a, "client")):
                        impl, _ = plan.impls[side]
                        rel = night // plan.release_every[side] + side % 5
                        version = version_of(side, rel)
                        base, flaky = plan.behaviour(side, rel, protocol)
                        mask = roles == role
                        idx = subset[mask]
                        b2 = base[idx].copy()
                        b2[(incompatible[mask]) & (b2 == 0)] = 1
                        lines += block(
                            plan,
                            rng,
                            protocol,
                            impl,
                            version,
                            f"{impl}-{version.rsplit('.', 1)[0]}",
                            run_id,
                            plan.impls[other][0],
                            b2,
                            flaky[idx],
                            t,
                            idx,
                        )
                        t = t + np.timedelta64(5_000, "ms")
            runs.append((run_id, lines, True))
    return runs


def block(
    plan: Plan,
    rng: np.random.Generator,
    protocol: str,
    impl: str,
    version: str,
    target: str,
    run_id: str,
    peer: str | None,
    base: np.ndarray,
    flaky: np.ndarray,
    t0: np.datetime64,
    idx: np.ndarray | None,
) -> list[str]:
    """Lines for one target over a list of cases: every random draw and every
    per-line string piece is an array operation; only the final f-string
    assembly is a Python loop (one allocation per line)."""
    n = len(base)
    outcome = base.astype(np.int64)
    outcome[flaky & (outcome == 0) & (rng.random(n) < 0.3)] = 1
    outcome[(outcome != 2) & (rng.random(n) < 0.0008)] = 3
    # A failed case blocks the next case (its dependent) half of the time.
    after_failure = np.zeros(n, dtype=bool)
    after_failure[1:] = outcome[:-1] == 1
    blocked = after_failure & (outcome != 2) & (rng.random(n) < 0.5)
    outcome[blocked] = BLOCKED
    dur = np.minimum(rng.gamma(1.5, 250.0, n).astype(np.int64), 29999)
    dur[outcome == 2] = 0
    times = t0 + np.cumsum(dur // 10 + 2).astype("timedelta64[ms]")
    tstr = np.datetime_as_string(times, unit="ms").tolist()
    dstr = plan.dur_table[dur].tolist()
    ofr = plan.outcome_table[outcome * 5 + rng.integers(0, 5, n)].tolist()
    if blocked.any():
        ids = plan.ids[protocol] if idx is None else [plan.ids[protocol][i] for i in idx.tolist()]
        for i in np.flatnonzero(blocked).tolist():
            message = f"blocked by {ids[i - 1]} (failed): {FAIL_MESSAGES[i % len(FAIL_MESSAGES)]}"
            ofr[i] = f'{json.dumps(message)}, "outcome": "blocked"'
    mid = (
        f', "harness_version": "{HARNESS_VERSION}", "host": "nightly-1", '
        f'"implementation": "{impl}", "implementation_version": "{version}", "level": "'
    )
    peer_s = "null" if peer is None else f'"{peer}"'
    after = [
        (
            f', "peer_implementation": {peer_s}, "protocol": "{protocol}", "role": "{role}", '
            f'"run_id": "{run_id}", "target": "{target}", "time": "'
        )
        for role in ("server", "client")
    ]
    head, lvl, role, tail = (
        plan.head[protocol],
        plan.lvl[protocol],
        plan.role_i[protocol],
        plan.tail[protocol],
    )
    if idx is not None:
        pick = idx.tolist()
        head, lvl, role, tail = ([x[i] for i in pick] for x in (head, lvl, role, tail))
    return [
        f"{h}{d}{mid}{lv}{o}{after[r]}{ts}{tl}"
        for h, d, lv, o, r, ts, tl in zip(head, dstr, lvl, ofr, role, tstr, tail)
    ]


def write_night(args_dict: dict, night: int) -> dict:
    """Worker: write one night's run directories; returns counts."""
    args = argparse.Namespace(**args_dict)
    plan = _plan_cache(args)
    rng = np.random.default_rng([args.seed, night, 11])
    counts = {"runs": 0, "unfinished": 0, "rows": 0, "malformed": 0, "torn": 0}
    for run_id, lines, _ in night_runs(plan, night):
        run_dir = Path(args.out) / "runs" / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        unfinished = rng.random() < args.unfinished
        torn = ""
        if unfinished:
            # Killed part-way: keep a prefix, then half of the next line, no newline.
            keep = int(rng.integers(1, max(2, len(lines))))
            nxt = lines[keep] if keep < len(lines) else lines[-1]
            torn = nxt[: len(nxt) // 2]
            lines = lines[:keep]
        bad = int(rng.poisson(args.malformed * len(lines))) if args.malformed else 0
        if bad:
            # Corrupt lines: garbage, a record without outcome, an unknown outcome.
            pos = sorted(rng.choice(len(lines), size=min(bad, len(lines)), replace=False).tolist())
            kinds = [
                "not json at all\n",
                '{"run_id": "' + run_id + '", "case_id": "x.y.server.z"}\n',
                lines[0].replace('"outcome": "', '"outcome": "maybe-'),
            ]
            for j, p in enumerate(pos):
                lines.insert(p + j, kinds[j % 3])
            bad = len(pos)
        text = "".join(lines) + torn
        RunFolder(run_dir).results.write_text(text, encoding="utf-8")
        rows = len(lines) - bad
        if not unfinished:
            RunFolder(run_dir).summary.write_text(
                json.dumps(
                    {
                        "run_id": run_id,
                        "harness_version": HARNESS_VERSION,
                        "cases": rows,
                        "synthetic": True,
                    },
                    sort_keys=True,
                )
                + "\n",
                encoding="utf-8",
            )
        counts["runs"] += 1
        counts["unfinished"] += unfinished
        counts["rows"] += rows
        counts["malformed"] += bad
        counts["torn"] += bool(torn)
    return counts


_PLAN: tuple[tuple, Plan] | None = None


def _plan_cache(args: argparse.Namespace) -> Plan:
    global _PLAN
    key = tuple(sorted(vars(args).items()))
    if _PLAN is None or _PLAN[0] != key:
        _PLAN = (key, Plan(args))
    return _PLAN[1]


def rows_per_night(args: argparse.Namespace) -> int:
    impls = implementations(args.implementations)
    conformance = len(impls) * args.versions * args.cases
    interop = 0
    if args.interop:
        per_proto: dict[str, int] = {}
        for _, p in impls:
            per_proto[p] = per_proto.get(p, 0) + 1
        interop = sum(k * (k - 1) for k in per_proto.values() if k > 1) * min(
            args.interop_cases, args.cases
        )
    return conformance + interop


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", required=True, help="output directory (runs/ and manifest.json go here)"
    )
    parser.add_argument(
        "--rows", type=int, default=None, help="about this many rows: sets --nights (overrides it)"
    )
    parser.add_argument("--implementations", type=int, default=20)
    parser.add_argument("--cases", type=int, default=400, help="cases per protocol")
    parser.add_argument(
        "--versions", type=int, default=2, help="releases certified per implementation per night"
    )
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--interop", type=int, default=1, help="1: nightly interop runs (0: none)")
    parser.add_argument("--interop-cases", type=int, default=40, help="cases per interop pair")
    parser.add_argument(
        "--unfinished", type=float, default=0.003, help="share of runs killed part-way"
    )
    parser.add_argument("--malformed", type=float, default=2e-5, help="share of malformed lines")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--clean", action="store_true", help="remove OUT/runs first")
    args = parser.parse_args(argv)
    if args.rows:
        args.nights = max(1, math.ceil(args.rows / rows_per_night(args)))
    return args


def generate(args: argparse.Namespace, quiet: bool = False) -> dict:
    out = Path(args.out)
    if args.clean and (out / "runs").exists():
        shutil.rmtree(out / "runs")
    (out / "runs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    d = {k: v for k, v in vars(args).items() if k not in ("jobs", "clean", "rows")}
    total = {"runs": 0, "unfinished": 0, "rows": 0, "malformed": 0, "torn": 0}
    nights = range(args.nights)
    if args.jobs > 1 and args.nights > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = pool.map(write_night, [d] * args.nights, nights)
            for i, c in enumerate(results):
                for k in total:
                    total[k] += c[k]
                if not quiet and (i + 1) % max(1, args.nights // 10) == 0:
                    print(
                        f"  night {i + 1}/{args.nights}: {total['rows']:,} rows",
                        file=sys.stderr,
                        flush=True,
                    )
    else:
        for n in nights:
            c = write_night(d, n)
            for k in total:
                total[k] += c[k]
    manifest = {
        **total,
        "nights": args.nights,
        "implementations": args.implementations,
        "cases_per_protocol": args.cases,
        "versions": args.versions,
        "seed": args.seed,
        "seconds": round(time.monotonic() - started, 2),
    }
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return manifest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    manifest = generate(args)
    print(json.dumps(manifest, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
