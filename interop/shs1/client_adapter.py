"""shs1-test client-role adapter: `shs1testclient WRAPPER` runs it as
`client_adapter.py NETWORK_KEY_HEX SERVER_PUBLIC_HEX`.

Uses a fresh random long-term identity (shs1-test lets the client choose),
writes msg1, reads msg2, writes msg3, reads msg4 and then writes the outcome
(encrypt key/nonce, decrypt key/nonce from the client's point of view);
exits 1 without further output when the server's message is bad.
"""

import os
import sys

import stdio_handshake


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        stdio_handshake.fail(
            stdio_handshake.EXIT_BAD_ARGUMENTS,
            "usage: client_adapter.py NETWORK_KEY_HEX SERVER_PUBLIC_HEX",
        )
    network_key = stdio_handshake.hex_argument(argv[1], 32, "network key")
    server_public = stdio_handshake.hex_argument(argv[2], 32, "server public key")

    from reference_impl.ssb.keys import Keypair
    from reference_impl.ssb.shs import ClientHandshake

    handshake = ClientHandshake(network_key, Keypair.from_seed(os.urandom(32)), server_public)
    stdio_handshake.write_all(handshake.data_to_send())
    stdio_handshake.run(handshake)


if __name__ == "__main__":
    main(sys.argv)
