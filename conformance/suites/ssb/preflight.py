"""The SSB part of the preflight: what a target definition must hold before
any case runs, so that a wrong key is one clear error, not one per case."""

from __future__ import annotations

from conformance.core.targets import TargetError, TargetRuntime
from reference_impl.ssb.keys import Keypair, feed_id_to_public

NETWORK_KEY_SIZE = 32


def preflight(runtime: TargetRuntime, serving: bool = True) -> list[str]:
    """Problems with the target's SSB identity and keys (never their values,
    except the public key, which is public)."""
    if not serving:
        return []
    problems = []
    public_key = runtime.params.get("public_key")
    if not public_key:
        problems.append(
            "params.public_key is missing (the node's @<base64 of 32 bytes>.ed25519 identity; "
            "set it in the targets file or have launch.outputs read it)"
        )
    else:
        try:
            feed_id_to_public(str(public_key))
        except ValueError as exc:
            problems.append(
                f"params.public_key {str(public_key)!r} is not @<base64 of 32 bytes>.ed25519: {exc}"
            )
    if "network_key" in runtime.target.credentials:
        try:
            raw = runtime.credential("network_key").strip()
        except TargetError as exc:
            problems.append(str(exc))
        else:
            try:
                key = bytes.fromhex(raw.decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                problems.append(
                    "credential network_key is not hex (it must hold 32 bytes as 64 hex digits)"
                )
            else:
                if len(key) != NETWORK_KEY_SIZE:
                    problems.append(
                        f"credential network_key holds {len(key)} byte(s); it must hold "
                        f"{NETWORK_KEY_SIZE} (64 hex digits)"
                    )
    if "secret_key" in runtime.target.credentials:
        try:
            Keypair.load(runtime.credential_file("secret_key"))
        except (OSError, ValueError, TargetError) as exc:
            # Keypair.load's errors name the file and the field, never the key.
            problems.append(
                f"credential secret_key is not a readable ssb-keys secret file: "
                f"{getattr(exc, 'strerror', None) or exc}"
            )
    return problems
