"""RIPP, the binary envelope protocol of the Ripple workers (``ripp-wire-protocol.txt``).

* :mod:`.envelope` -- the 63-byte-overhead envelope with CRC-32C, the check
  order, a bounded stream reader.
* :mod:`.binprot` -- a bounded bin_prot reader/writer (type descriptors).
* :mod:`.payloads` -- the payload types of ``docs/ripp-profile.md`` P3.
* :mod:`.schema` -- ``check_backward`` and the consumer's negotiation.
* :mod:`.session` -- sans-I/O producer and consumer sessions.
* ``node``, ``__main__``, ``faults`` -- the asyncio node over TCP
  (``python -m reference_impl.ripp consume|produce``) and its fault modes.
* ``_fastenvelope.c`` -- optional C fast path of ``envelope.decode_envelope``.
"""
