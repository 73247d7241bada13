"""BTP 2.0 (Interledger Bilateral Transfer Protocol, RFC 23) reference implementation.

* :mod:`.oer` -- the CANONICAL-OER primitives (RFC 30): length determinants,
  integers, octet and IA5 strings, GeneralizedTime, a bounds-checked reader.
* :mod:`.packet` -- the packet codec: dataclasses for the seven packet types,
  :func:`~.packet.decode_packet` / :func:`~.packet.encode_packet`, the error
  code table.  Pure and sans-I/O; its decisions on extra bytes, content types
  and timestamps are documented there and pinned by ``vectors/btp``.
* ``session``, ``node``, ``__main__`` -- the BTP session state machine and the
  WebSocket node built on the codec.
"""
