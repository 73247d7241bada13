"""Ripple host protocol (BEEP-style MSG/RPY/ERR frames over TCP) reference implementation.

* :mod:`.frame` -- the sans-I/O frame codec: host and node frames, the strict
  header grammar, ``size`` and the ``END`` trailer, reassembly of chunked
  messages interleaved with others, bounds.
* :mod:`.session` -- the sans-I/O session: host-id exchange, msgno parity by
  role, outstanding MSGs, replies, closing on frames that fit neither format.
* :mod:`.node`, ``__main__`` -- the asyncio node (``serve`` = acceptor,
  ``connect`` = initiator, TLS optional); :mod:`.faults` -- deliberate faults.

What the text leaves open is decided in docs/ripplehost-profile.md.
"""
