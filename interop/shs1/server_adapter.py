"""shs1-test server-role adapter: `shs1testserver WRAPPER` runs it as
`server_adapter.py NETWORK_KEY_HEX SERVER_SECRET_HEX SERVER_PUBLIC_HEX`
(secret = 64-byte ed25519 secret key, seed followed by public key).

Reads msg1, writes msg2, reads msg3, writes msg4 and then the outcome
(encrypt key/nonce, decrypt key/nonce from the server's point of view);
exits 1 without further output when the client's message is bad.
"""

import sys

import stdio_handshake


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        stdio_handshake.fail(
            stdio_handshake.EXIT_BAD_ARGUMENTS,
            "usage: server_adapter.py NETWORK_KEY_HEX SERVER_SECRET_HEX SERVER_PUBLIC_HEX",
        )
    network_key = stdio_handshake.hex_argument(argv[1], 32, "network key")
    server_secret = stdio_handshake.hex_argument(argv[2], 64, "server secret key")
    server_public = stdio_handshake.hex_argument(argv[3], 32, "server public key")

    from reference_impl.ssb.keys import Keypair
    from reference_impl.ssb.shs import ServerHandshake

    try:
        keypair = Keypair.from_secret(server_secret)
    except ValueError as error:
        stdio_handshake.fail(stdio_handshake.EXIT_BAD_ARGUMENTS, f"server secret key: {error}")
    if keypair.public != server_public:
        stdio_handshake.fail(
            stdio_handshake.EXIT_BAD_ARGUMENTS,
            "server public key does not belong to the secret key",
        )
    stdio_handshake.run(ServerHandshake(network_key, keypair))


if __name__ == "__main__":
    main(sys.argv)
