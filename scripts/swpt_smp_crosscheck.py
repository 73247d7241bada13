#!/usr/bin/env python3
"""Cross-checks the SMP vectors (vectors/stomp/smp.json) against swpt_stomp's
own SMP validation, an independent reading of SMP 2.1 (swpt_stomp
smp_schemas.py, through process_messages.py ``parse_message_body``, the check
swpt-server applies to every SEND).

    scripts/swpt_smp_crosscheck.py [--swpt-python PATH] [--json]

swpt_stomp runs in its own venv (scripts/install-swpt-stomp.sh), never in the
harness's: interop/stomp/swpt/smp_validate.py is run there and fed every
vector. The comparison, per vector:

- a ``valid`` vector swpt_stomp refuses: a disagreement (unexplained);
- an ``invalid`` vector swpt_stomp accepts: a disagreement, explained when
  the vector carries ``swpt_divergence`` saying swpt_stomp accepts it;
- an ``invalid`` vector swpt_stomp refuses only by an exception other than
  its validation error (UnicodeEncodeError, RecursionError, ValueError):
  explained when ``swpt_divergence`` says it raises;
- a vector whose ``swpt_divergence`` no longer matches what swpt_stomp does:
  a stale mark (unexplained).

Prints the disagreements grouped by what swpt_stomp does; exit status 0 when
every disagreement is explained by its vector's ``swpt_divergence``, 1 when
some is not, 2 when swpt_stomp is not installed. The write-up is
docs/findings/swpt_stomp-0.1.0.md, "SMP validation".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VECTORS = REPO / "vectors" / "stomp" / "smp.json"
SWPT_PYTHON = REPO / ".tools" / "swpt-stomp" / "venv" / "bin" / "python"
VALIDATE = REPO / "interop" / "stomp" / "swpt" / "smp_validate.py"


def run_swpt(python: Path, vectors: list[dict]) -> dict[str, dict]:
    lines = "".join(
        json.dumps({k: v[k] for k in ("id", "type", "body", "body_hex") if k in v}) + "\n"
        for v in vectors
    )
    done = subprocess.run(
        [str(python), str(VALIDATE)],
        input=lines.encode("utf-8"),
        capture_output=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"swpt_smp_crosscheck: {VALIDATE.name} failed ({done.returncode}): "
            f"{done.stderr.decode('utf-8', 'replace')[-2000:]}"
        )
    results = {}
    for line in done.stdout.decode("utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            results[record["id"]] = record
    return results


def expected_from_mark(mark: str) -> str:
    """What a vector's swpt_divergence says swpt_stomp does: "accepts" or
    "crashes" (refuses by an exception other than its validation error)."""
    return "crashes" if "raise" in mark else "accepts"


def compare(data: dict, results: dict[str, dict]) -> dict:
    explained: dict[str, list[str]] = defaultdict(list)
    unexplained: list[str] = []
    counts = {"valid": 0, "invalid": 0}
    for kind in ("valid", "invalid"):
        for vector in data[kind]:
            counts[kind] += 1
            got = results.get(vector["id"])
            if got is None:
                unexplained.append(f"{vector['id']}: no answer from swpt_stomp")
                continue
            crashed = not got["accepted"] and (got["error"] or "").startswith("crash:")
            does = "accepts" if got["accepted"] else ("crashes" if crashed else "refuses")
            mark = vector.get("swpt_divergence")
            if kind == "valid":
                if does != "accepts":
                    unexplained.append(
                        f"{vector['id']} (valid): swpt_stomp {does} it: {got['error']}"
                    )
                continue
            if mark is None:
                if does == "accepts":
                    unexplained.append(
                        f"{vector['id']} (invalid: {vector['field']} {vector['reason']}): "
                        "swpt_stomp accepts it, and the vector has no swpt_divergence"
                    )
                elif does == "crashes":
                    unexplained.append(
                        f"{vector['id']} (invalid): swpt_stomp refuses it by a crash: {got['error']}"
                    )
                continue
            want = expected_from_mark(mark)
            if does != want:
                unexplained.append(
                    f"{vector['id']}: swpt_divergence says swpt_stomp {want} it, but it {does} it"
                    f"{': ' + got['error'] if got['error'] else ''}"
                )
                continue
            what = {
                "accepts": "accepts it",
                "crashes": "refuses it by an exception other than its validation error",
            }
            explained[f"swpt_stomp {what[does]}: {mark}"].append(vector["id"])
    return {"counts": counts, "explained": dict(explained), "unexplained": unexplained}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--swpt-python", default=str(SWPT_PYTHON), help="the Python of swpt_stomp's venv"
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    python = Path(args.swpt_python)
    if not python.exists():
        print(
            f"swpt_smp_crosscheck: {python} not found: run scripts/install-swpt-stomp.sh",
            file=sys.stderr,
        )
        return 2
    data = json.loads(VECTORS.read_text("utf-8"))
    report = compare(data, run_swpt(python, data["valid"] + data["invalid"]))
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        c = report["counts"]
        print(
            f"{c['valid']} valid and {c['invalid']} invalid vectors through swpt_stomp's parse_message_body"
        )
        for what, ids in sorted(report["explained"].items(), key=lambda item: -len(item[1])):
            print(f"\n{len(ids)} vector(s), {what}")
            for vector_id in ids:
                print(f"  {vector_id}")
        print(f"\nunexplained: {len(report['unexplained'])}")
        for line in report["unexplained"]:
            print(f"  {line}")
    return 1 if report["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
