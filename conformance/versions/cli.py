"""``conformance versions list|certify``: the releases of an implementation,
and each of them certified as a target of its own (docs/versions.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from ..argtypes import positive_int, positive_seconds
from ..core.package_install import ensure_installed
from ..core.run_folder import RunFolder
from ..core.targets import Target, TargetError, load_targets
from ..core.versioned_targets import resolve_versioned, split_versioned_name, versionable
from ..jobs import Console
from ..runner import EXIT_USAGE, RunOptions, certify, new_run_dir, suite_case_counts
from .registry import RangeError, RegistryError, releases, select
from .shard import parse_shard, shard_of

VERSIONS_FILE = "versions.json"
"""Written into a ``versions certify`` run dir: each target's release and
its install (seconds, cached or not, the reason it failed)."""


def base_target(targets: dict[str, Target], name: str) -> Target:
    """The target whose releases NAME means: a target name, or the
    implementation or package name of a target with a [versions] table."""
    candidates = versionable(targets)
    if name in candidates:
        return candidates[name]
    for target in candidates.values():
        if name in (target.implementation, target.versions.package):
            return target
    known = ", ".join(sorted(candidates)) or "none"
    what = "has no [versions] table" if name in targets else "is not a known implementation"
    raise TargetError(f"{name!r} {what}; implementations with releases: {known} (docs/versions.md)")


def chosen_versions(targets: dict[str, Target], args: argparse.Namespace) -> list[str]:
    """The NAME@VERSION of every release the command line selects, oldest
    first per implementation, in the order the implementations were named."""
    names: list[str] = []
    for implementation in args.implementation:
        base = base_target(targets, implementation)
        assert base.versions is not None
        listed = releases(base.versions.registry, base.versions.package)
        selected = select(base.versions.registry, listed, args.range, args.pre)
        if not selected:
            raise TargetError(
                f"no release of {base.versions.package} ({base.versions.registry}) matches "
                f"{args.range!r}{'' if args.pre else ' (pre-releases left out: --pre)'}; "
                f"{len(listed)} release(s) listed"
            )
        names += [f"{base.name}@{version}" for version in selected]
    return names


def from_file(path: str) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TargetError(f"--from-file {path}: {exc.strerror or exc}") from None
    names = [line.split("#", 1)[0].strip() for line in lines]
    names = [name for name in names if name]
    for name in names:
        if split_versioned_name(name) is None:
            raise TargetError(f"--from-file {path}: {name!r} is not NAME@VERSION")
    return names


def cmd_list(args: argparse.Namespace) -> int:
    try:
        targets = load_targets(args.targets_file)
        names = chosen_versions(targets, args)
    except (TargetError, RangeError) as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RegistryError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps([{"target": n, "version": n.split("@", 1)[1]} for n in names], indent=1))
    elif args.names:
        print("\n".join(names))
    else:
        for implementation in args.implementation:
            base = base_target(targets, implementation)
            mine = [n.split("@", 1)[1] for n in names if n.startswith(base.name + "@")]
            print(
                f"{base.name} ({base.versions.package}, {base.versions.registry}): "
                f"{len(mine)} release(s): {' '.join(mine)}"
            )
    return 0


def install_all(chosen: list[Target], jobs: int, console: Console) -> dict[str, dict]:
    """Install every chosen release (cached ones at once), ``jobs`` at a
    time, with a line each; a failed install is tried again here."""
    done: dict[str, dict] = {}

    def one(target: Target) -> None:
        assert target.package is not None
        result = ensure_installed(target.package, retry_failed=True)
        how = "cached" if result.cached else f"installed in {result.seconds:.1f} s"
        done[target.name] = {
            "implementation": target.implementation,
            "version": target.version,
            "install_ok": result.ok,
            "install_cached": result.cached,
            "install_seconds": result.seconds,
            "install_reason": result.reason,
            "install_log": str(target.package.log_path),
        }
        console.line(
            f"== install {target.name}: {how}"
            if result.ok
            else f"== install {target.name}: FAILED ({result.reason[:300]}): certified as not started"
        )

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, chosen))
    return done


def install_versioned(chosen: list[Target], jobs: int, console: Console) -> dict[str, dict]:
    """Before the sessions: the releases of the versioned targets among
    ``chosen`` installed (a line each), so that no case's time goes to an
    install; a failure is tried again, then certified as not started."""
    versioned = [t for t in chosen if t.package is not None]
    return install_all(versioned, jobs, console) if versioned else {}


def cmd_certify(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        if bool(args.implementation) == bool(args.from_file):
            raise TargetError("name the implementations, or give --from-file (not both)")
        if args.implementation and not (args.range or args.every_release):
            raise TargetError("say which releases: --range '>=8,<9' or --every-release")
        targets = load_targets(args.targets_file)
        names = from_file(args.from_file) if args.from_file else chosen_versions(targets, args)
        resolve_versioned(targets, names)
        every = [targets[name] for name in names]
        counts = suite_case_counts()
        chosen = (
            shard_of(every, args.shard, lambda t: t.name, lambda t: counts.get(t.protocol, 1))
            if args.shard
            else every
        )
    except (TargetError, RangeError, RegistryError) as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    share = f", shard {args.shard[0]}/{args.shard[1]}: {len(chosen)}" if args.shard else ""
    print(f"versions: {len(every)} release(s) in all{share}", flush=True)
    if not chosen:
        print("versions: this shard has no target (more shards than targets)")
        return 0
    console = Console()
    run_id, run_dir = new_run_dir(args.run_dir, args.reports_dir)
    args.run_dir_made = run_dir
    print(f"conformance: run {run_id}, certifying {', '.join(t.name for t in chosen)}", flush=True)
    installs = install_all(chosen, args.jobs, console)
    (run_dir / VERSIONS_FILE).write_text(
        json.dumps(
            {
                "shard": list(args.shard) if args.shard else None,
                "targets_in_all": len(every),
                "targets": [dict(target=t.name, **installs[t.name]) for t in chosen],
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    options = RunOptions(
        targets_file=list(args.targets_file),
        deadline=args.deadline,
        run_timeout=args.run_timeout,
        jobs=args.jobs,
    )
    run = certify(chosen, run_dir, run_id, options, console)
    if run.summary is None:
        for _, error in run.preflight_failures:
            print(f"conformance: error: preflight: {error}", file=sys.stderr)
        return run.exit_code
    args.print_summary(run.summary, run_dir, RunFolder(run_dir).results)
    not_started = run.summary.get("not_started", [])
    print(
        f"versions: {len(chosen)} release(s) certified, {len(not_started)} not started; "
        f"wall time {time.monotonic() - started:.1f} s"
    )
    return run.exit_code


def register(sub: argparse._SubParsersAction, print_summary: Callable[..., None]) -> None:
    """The ``versions`` command; ``print_summary`` is certify's (conformance/cli.py,
    which imports this module)."""
    versions = sub.add_parser(
        "versions", help="list the releases of an implementation, certify each as its own target"
    )
    inner = versions.add_subparsers(dest="versions_command", required=True)

    def selection(parser: argparse.ArgumentParser, required: bool) -> None:
        parser.add_argument(
            "implementation",
            nargs="+" if required else "*",
            help="a target with a [versions] table (stomp-py, stompit, ilp-plugin-btp, ...), or "
            "its implementation or package name",
        )
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--range",
            default=None,
            help="releases to take: comparators, e.g. '>=8,<9' (PEP 440 for PyPI, semver for npm)",
        )
        group.add_argument(
            "--every-release", action="store_true", help="every release (the default of list)"
        )
        parser.add_argument("--pre", action="store_true", help="pre-releases too")
        parser.add_argument(
            "--targets-file", action="append", default=[], help="TOML targets file (repeatable)"
        )

    listing = inner.add_parser("list", help="the releases, oldest first, from the registry")
    selection(listing, required=True)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument(
        "--names", action="store_true", help="one NAME@VERSION a line (for --from-file)"
    )
    listing.set_defaults(func=cmd_list)

    certifying = inner.add_parser(
        "certify", help="certify each selected release as a target of its own (NAME@VERSION)"
    )
    selection(certifying, required=False)
    certifying.add_argument(
        "--from-file",
        default=None,
        metavar="FILE",
        help="the targets, one NAME@VERSION a line (`versions list --names`), instead of a query",
    )
    certifying.add_argument(
        "--shard",
        type=parse_shard,
        default=None,
        metavar="K/N",
        help="only the K-th of N shares of the targets (1-based; the same on every machine)",
    )
    certifying.add_argument(
        "--jobs", type=positive_int, default=1, metavar="N", help="targets (and installs) at once"
    )
    certifying.add_argument("--reports-dir", default="reports", help="where runs are written")
    certifying.add_argument("--run-dir", default=None, help="exact run directory")
    certifying.add_argument(
        "--deadline", type=positive_seconds, default=3.0, help="read deadline, seconds"
    )
    certifying.add_argument(
        "--run-timeout",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="deadline of each target's whole run",
    )
    certifying.set_defaults(func=cmd_certify, print_summary=print_summary)
