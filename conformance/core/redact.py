"""Keeping secrets out of traces, results, reports and logs.

Some secrets travel on the wire in the clear (a BTP ``auth_token``, a STOMP
passcode), so a faithful wire trace would print them. A :class:`Redactor`
knows the run's secret values (the targets' credentials) and masks every
occurrence: in bytes shown as hex dumps (the masked positions print as
``**``) and in text (failure messages, notes), in the raw form and as
hex and base64, the forms a message or log line most often shows them in.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

MIN_SECRET_LENGTH = 4
"""Shorter values are not masked: masking every ``ab`` in a trace would
hide the bytes the trace exists to show, and such a secret protects nothing."""

MASK = "[redacted]"


def _variants(secret: bytes) -> set[bytes]:
    forms = {secret, secret.strip()}
    for value in list(forms):
        forms.add(value.hex().encode())
        forms.add(base64.b64encode(value).rstrip(b"="))
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """The secret values of a run, and how to mask them."""

    def __init__(self, secrets: Iterable[bytes] = ()) -> None:
        self._forms: set[bytes] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: bytes | str) -> None:
        value = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
        self._forms |= _variants(value)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def masked_positions(self, data: bytes) -> set[int]:
        """Offsets in ``data`` that belong to a secret."""
        positions: set[int] = set()
        for form in self._forms:
            start = data.find(form)
            while start != -1:
                positions.update(range(start, start + len(form)))
                start = data.find(form, start + 1)
        return positions

    def masked(self, data: bytes) -> bytes:
        """``data`` with every byte of a secret replaced by ``*`` (same
        length, so offsets in it still hold)."""
        positions = self.masked_positions(data)
        if not positions:
            return data
        out = bytearray(data)
        for i in positions:
            out[i] = 0x2A
        return bytes(out)

    def text(self, text: str) -> str:
        """``text`` with every secret form replaced by ``[redacted]``;
        longest forms first, so a secret's hex is not half-masked by a
        shorter form inside it."""
        if not self._forms or not text:
            return text
        for form in sorted(self._forms, key=len, reverse=True):
            needle = form.decode("utf-8", "ignore")
            if len(needle) >= MIN_SECRET_LENGTH and needle in text:
                text = text.replace(needle, MASK)
            # bytes reprs in assertion messages: b'...'
            escaped = repr(form)[2:-1]
            if escaped != needle and len(escaped) >= MIN_SECRET_LENGTH and escaped in text:
                text = text.replace(escaped, MASK)
        return text
