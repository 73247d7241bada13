"""The Ripple host reference node's faults: ``python -m reference_impl.ripplehost
serve|connect --fault NAME`` (repeatable). Each breaks one rule of the Ripple
host protocol (sctp-binding.txt) or of the project's profile
(docs/ripplehost-profile.md) on purpose; ``cases`` are the conformance cases
that must catch it (see reference_impl/faults.py and docs/mutation.md).

The case ids are the ones the ripplehost suite (conformance/suites/ripplehost/)
is to declare; the role in an id is the target's: "server" = the acceptor
(``serve``), "client" = the initiator (``connect``).

The sans-I/O session takes them as ``RippleSession(faults=...)``, the node
layer as ``RippleNode(faults=...)`` and ``run_initiator(faults=...)``.
"""

from __future__ import annotations

from ..faults import FaultSpec, fault_enum

HOSTID_S = "ripplehost.hostid.server."
HOSTID_C = "ripplehost.hostid.client."
MSGNO_S = "ripplehost.msgno.server."
MSGNO_C = "ripplehost.msgno.client."
FRAME_S = "ripplehost.frame.server."
FRAME_C = "ripplehost.frame.client."
CHUNK_S = "ripplehost.chunk.server."
MESSAGE_S = "ripplehost.message.server."
NODE_S = "ripplehost.node.server."
CHUNK_C = "ripplehost.chunk.client."

SPECS: tuple[FaultSpec, ...] = (
    # --- acceptor (serve)
    FaultSpec(
        "no-host-id-reply",
        "server",
        "never answer the initiator's host-id MSG (other MSGs are still served)",
        (HOSTID_S + "replies-with-host-id",),
    ),
    FaultSpec(
        "even-msgnos",
        "server",
        "the acceptor numbers its own MSGs with even msgnos (the initiator's parity)",
        (MSGNO_S + "uses-odd-msgnos",),
    ),
    FaultSpec(
        "reply-wrong-msgno",
        "server",
        "RPY and ERR frames carry the MSG's msgno + 2 (the host-id reply keeps the right one)",
        (MSGNO_S + "reply-carries-msgno",),
    ),
    FaultSpec(
        "accept-wrong-parity",
        "server",
        "serve a MSG whose msgno has the acceptor's own (odd) parity instead of closing",
        (MSGNO_S + "closes-on-wrong-parity",),
    ),
    FaultSpec(
        "reuse-msgno",
        "server",
        "after the host-id exchange every MSG of the acceptor's own carries msgno 1, sent without waiting "
        "for answers (each answer to msgno 1 is taken for one of them)",
        (MSGNO_S + "unique-outstanding-msgnos",),
    ),
    FaultSpec(
        "accept-reused-msgno",
        "server",
        "serve a MSG that reuses the msgno of a MSG still awaiting its answer instead of closing",
        (MSGNO_S + "closes-on-reused-msgno",),
    ),
    FaultSpec(
        "close-on-answered-msgno",
        "server",
        "close the association on a MSG reusing any msgno the initiator used before, also one whose MSG "
        "was answered",
        (MSGNO_S + "closes-on-reused-msgno",),
    ),
    FaultSpec(
        "msg-before-host-id-reply",
        "server",
        'send a MSG {"type":"ping"} of the acceptor\'s own before the RPY to the initiator\'s host-id',
        (HOSTID_S + "sends-nothing-before-host-id-reply",),
    ),
    FaultSpec(
        "accept-unknown-reply",
        "server",
        "drop an RPY or ERR for a msgno with no outstanding MSG silently and keep the association",
        (MSGNO_S + "closes-on-reply-to-unknown-msgno",),
    ),
    FaultSpec(
        "answer-malformed",
        "server",
        "answer a frame that breaks the grammar with an ERR before closing",
        (FRAME_S + "closes-silently-on-malformed-header",),
    ),
    FaultSpec(
        "stay-open-on-malformed",
        "server",
        "after a frame that breaks the grammar, drop what is buffered and keep the association open",
        (FRAME_S + "closes-on-malformed-header",),
    ),
    FaultSpec(
        "accept-missing-end",
        "server",
        "take any five bytes after the content as the trailer (a frame without END is served)",
        (FRAME_S + "closes-on-missing-end",),
    ),
    FaultSpec(
        "ignore-size",
        "server",
        "end the content at the first END CRLF whatever size says (a wrong size is served)",
        (FRAME_S + "closes-on-wrong-size",),
    ),
    FaultSpec(
        "no-interleave",
        "server",
        "close the association when a frame of another message arrives while a chunked one is incomplete",
        (CHUNK_S + "reassembles-interleaved",),
    ),
    FaultSpec(
        "rpy-to-unknown-type",
        "server",
        'answer a MSG of a type the node does not know with RPY {"type":"ok"} instead of the '
        "profile's ERR",
        (MESSAGE_S + "err-for-unknown-type",),
    ),
    FaultSpec(
        "serve-before-host-id",
        "server",
        "serve a MSG that comes before the initiator's host-id instead of answering ERR host-id-required "
        "and closing",
        (HOSTID_S + "refuses-msg-before-host-id",),
    ),
    FaultSpec(
        "serve-any-version",
        "server",
        "serve a MSG of any version instead of answering ERR unsupported-version",
        (MESSAGE_S + "err-for-unsupported-version",),
    ),
    FaultSpec(
        "refuse-chunked",
        "server",
        "close the association on a frame whose more flag is '*' (only single-frame messages are served)",
        (CHUNK_S + "reassembles-chunked",),
    ),
    FaultSpec(
        "refuse-crlf-before-end",
        "server",
        "close the association on a frame whose content ends in CRLF (as if size excluded a line break "
        "before END)",
        (CHUNK_S + "counts-crlf-before-end",),
    ),
    FaultSpec(
        "refuse-node-frames",
        "server",
        "close the association on a node frame (one with to-user and from-user)",
        (NODE_S + "accepts-node-frame",),
    ),
    FaultSpec(
        "node-answer-as-host",
        "server",
        "answer a MSG that came in a node frame with a host frame (no to-user and from-user)",
        (NODE_S + "answer-swaps-users",),
    ),
    # --- initiator (connect)
    FaultSpec(
        "client-no-host-id",
        "client",
        "the initiator sends its messages without a host-id MSG first",
        (HOSTID_C + "sends-host-id-first",),
    ),
    FaultSpec(
        "client-no-wait-for-host-id",
        "client",
        "the initiator sends its other MSGs right after its host-id MSG, without waiting for the acceptor's "
        "host-id RPY",
        (HOSTID_C + "waits-for-host-id-reply",),
    ),
    FaultSpec(
        "client-odd-msgnos",
        "client",
        "the initiator numbers its MSGs (host-id included) with odd msgnos (the acceptor's parity)",
        (MSGNO_C + "uses-even-msgnos",),
    ),
    FaultSpec(
        "client-reuse-msgno",
        "client",
        "after the host-id exchange every MSG of the initiator carries msgno 2, sent without waiting "
        "for answers",
        (MSGNO_C + "unique-outstanding-msgnos",),
    ),
    FaultSpec(
        "client-reply-wrong-msgno",
        "client",
        "the initiator's RPY and ERR frames carry the MSG's msgno + 2",
        (MSGNO_C + "reply-carries-msgno",),
    ),
    FaultSpec(
        "client-stay-open-on-malformed",
        "client",
        "the initiator drops a frame that breaks the grammar and keeps the association open",
        (FRAME_C + "closes-on-malformed-header",),
    ),
    FaultSpec(
        "client-answer-malformed",
        "client",
        "the initiator answers a frame that breaks the grammar with an ERR before closing",
        (FRAME_C + "closes-silently-on-malformed-header",),
    ),
    FaultSpec(
        "client-accept-missing-end",
        "client",
        "the initiator takes any five bytes after the content as the trailer (a frame without END is served)",
        (FRAME_C + "closes-on-missing-end",),
    ),
    FaultSpec(
        "client-ignore-size",
        "client",
        "the initiator ends the content at the first END CRLF whatever size says (a wrong size is served)",
        (FRAME_C + "closes-on-wrong-size",),
    ),
    FaultSpec(
        "client-refuse-chunked",
        "client",
        "the initiator closes the association on a frame whose more flag is '*'",
        (CHUNK_C + "reassembles-chunked",),
    ),
)

Fault = fault_enum("Fault", SPECS)
"""One member per fault (``Fault.EVEN_MSGNOS`` is ``"even-msgnos"``)."""

REGISTRY: dict[str, FaultSpec] = {spec.name: spec for spec in SPECS}

NOT_ISOLABLE: dict[str, str] = {}
"""Cases whose rule cannot be broken without breaking other cases' rules too
(none so far)."""
