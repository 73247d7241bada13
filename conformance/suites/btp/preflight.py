"""The BTP part of the preflight: the WebSocket URL and the auth token must
be usable before any case runs."""

from __future__ import annotations

from urllib.parse import urlsplit

from conformance.core.targets import TargetRuntime


def preflight(runtime: TargetRuntime, serving: bool = True) -> list[str]:
    if not serving:
        return []
    problems = []
    url = runtime.url
    if not url:
        problems.append(
            "url is missing (the ws:// or wss:// address of the node; set url, "
            "or have launch.outputs read it)"
        )
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            # Shown without a user:password part a URL may carry.
            shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
            problems.append(
                f"url {shown!r} must be ws://HOST[:PORT]/... or wss://HOST[:PORT]/... "
                "(BTP runs over WebSocket)"
            )
    if "auth_token" not in runtime.target.credentials:
        problems.append(
            "no auth_token credential (auth_token_file or auth_token_env; it may hold an "
            "empty token when the node needs none)"
        )
    timeout = runtime.params.get("auth_timeout")
    if timeout is not None:
        try:
            if float(timeout) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            problems.append(
                f"params.auth_timeout must be a positive number of seconds, got {timeout!r}"
            )
    return problems
