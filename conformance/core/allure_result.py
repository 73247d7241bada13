"""One Allure result written by a command other than certify's pytest
session (``conformance fuzz``, ``conformance learn``), beside the results
that session writes into the run's ``allure-results/``, with the labels the
report groups by (target, then protocol, then what the command did), so
that ``conformance report`` shows it with the run's cases."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass

from .run_folder import RunFolder


@dataclass(frozen=True)
class Attachment:
    name: str
    """Shown in the report."""
    content: bytes | str
    mime: str
    """``text/plain``, ``image/svg+xml``, ``application/json`` ..."""
    extension: str
    """Of the file written (``txt``, ``svg``, ``json``): how a browser opens it."""


def write_allure_result(
    folder: RunFolder,
    *,
    target: str,
    protocol: str,
    kind: str,
    name: str,
    status: str,
    message: str,
    seconds: float,
    tags: tuple[str, ...] = (),
    attachments: tuple[Attachment, ...] = (),
) -> str:
    """Write one result (``status``: passed, failed, broken, skipped) named
    ``name`` under ``target`` > ``protocol`` > ``kind``; its uuid. The
    history id is the target and name, so a report's trend follows the same
    result from run to run."""
    out = folder.allure_results
    out.mkdir(parents=True, exist_ok=True)
    result_id = str(uuid.uuid4())
    entries = []
    for index, attachment in enumerate(attachments):
        source = f"{result_id}-{index}-attachment.{attachment.extension}"
        data = attachment.content
        (out / source).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        entries.append({"name": attachment.name, "source": source, "type": attachment.mime})
    now = int(time.time() * 1000)
    document = {
        "uuid": result_id,
        "historyId": hashlib.md5(f"{target}:{name}".encode()).hexdigest(),
        "name": name,
        "fullName": f"{kind}.{target}.{name}",
        "status": status,
        "statusDetails": {"message": message},
        "stage": "finished",
        "start": now - int(seconds * 1000),
        "stop": now,
        "labels": [
            {"name": "parentSuite", "value": target},
            {"name": "suite", "value": protocol},
            {"name": "subSuite", "value": kind},
            *({"name": "tag", "value": tag} for tag in (*tags, kind)),
        ],
        "parameters": [{"name": "target", "value": target}],
        "attachments": entries,
    }
    (out / f"{result_id}-result.json").write_text(json.dumps(document), encoding="utf-8")
    return result_id
