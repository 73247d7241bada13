"""Runs swpt_stomp's own SMP validation on message bodies: run with the
Python of swpt_stomp's venv (scripts/install-swpt-stomp.sh), never the
harness's. Reads JSON lines {"id", "type", "body" | "body_hex"} on stdin and
prints one JSON line per input: {"id", "accepted": bool, "error": str|null}.

The check is the one swpt-server applies to every SEND before it publishes
it (swpt_stomp process_messages.py ``parse_message_body``: the content type
must be application/json, the type one of smp_schemas.JSON_SCHEMAS, the
body UTF-8 JSON that the type's marshmallow schema loads), with both
message directions allowed (a node accepts one direction only, by its node
type; that is no reading of SMP).
"""

import json
import sys

from swpt_stomp.common import Message
from swpt_stomp.process_messages import ProcessingError, parse_message_body


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        vector = json.loads(line)
        body = (
            bytes.fromhex(vector["body_hex"])
            if "body_hex" in vector
            else vector["body"].encode("utf-8")
        )
        message = Message(
            id="1", type=vector["type"], body=bytearray(body), content_type="application/json"
        )
        try:
            parse_message_body(message)
        except ProcessingError as exc:
            cause = exc.__cause__
            detail = f"{exc.error_message}" + (
                f" ({type(cause).__name__}: {cause})" if cause else ""
            )
            print(
                json.dumps({"id": vector["id"], "accepted": False, "error": detail[:500]}),
                flush=True,
            )
        except Exception as exc:  # a crash of the validator is a refusal too, shown as such
            print(
                json.dumps(
                    {
                        "id": vector["id"],
                        "accepted": False,
                        "error": f"crash: {type(exc).__name__}: {exc}"[:500],
                    }
                ),
                flush=True,
            )
        else:
            print(json.dumps({"id": vector["id"], "accepted": True, "error": None}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
