"""reference_impl/stomp/manifest.py against vectors/stomp/manifests.json and the
profile's rules: validation naming the key, ${NODE_ID} substitution, the
weighted random choice, the implied application/json, a passcode kept out of
every repr, str and error message."""

from __future__ import annotations

import importlib.util
import json
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from reference_impl.stomp.manifest import (
    ManifestError,
    choose_server,
    parse_manifest,
    parse_server_address,
    render_manifest,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_PATH = REPO_ROOT / "vectors" / "stomp" / "manifests.json"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_stomp_vectors_manifest.py"
VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


def test_generator_reproduces_the_committed_file():
    spec = importlib.util.spec_from_file_location("gen_stomp_vectors_manifest", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.build() == {VECTORS_PATH: VECTORS_PATH.read_text(encoding="utf-8")}


@pytest.mark.parametrize("vector", **by_id(VECTORS["valid"]))
def test_valid_manifest(vector):
    manifest = parse_manifest(vector["toml"])
    want = vector["expected"]
    assert [(s.entry, s.host, s.port) for s in manifest.servers] == [
        (s["entry"], s["host"], s["port"]) for s in want["servers"]
    ]
    sub = manifest.substituted(vector["node_id"])
    assert (sub.host, sub.login, sub.passcode, sub.destination) == (
        want["host"],
        want["login"],
        want["passcode"],
        want["destination"],
    )
    assert list(sub.content_types()) == want["content_types"]
    assert sorted(manifest.extra) == want["extra_keys"]
    counts = Counter(s.entry for s in manifest.servers)
    assert {e: str(Fraction(n, len(manifest.servers))) for e, n in counts.items()} == want[
        "choice_probability"
    ]
    # The same manifest given as UTF-8 bytes.
    assert parse_manifest(vector["toml"].encode("utf-8")) == manifest


@pytest.mark.parametrize("vector", **by_id(VECTORS["invalid"]))
def test_invalid_manifest_names_the_key(vector):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(vector["toml"])
    assert (caught.value.key, caught.value.index) == (vector["key"], vector["index"])
    assert caught.value.reason == vector["reason"]
    if vector["key"] is not None:
        assert repr(vector["key"]) in str(caught.value)


def test_the_vectors_cover_every_described_key():
    blamed = {v["key"] for v in VECTORS["invalid"]}
    assert blamed >= {
        None,
        "servers",
        "host",
        "login",
        "passcode",
        "destination",
        "accepted-content-types",
    }


def test_profile_host_example():
    # "if the value is "/${NODE_ID}", and the client's node ID is 12345678, then
    # the client must send the header "host:/12345678""
    manifest = parse_manifest(
        'servers = ["h.example:1"]\nhost = "/${NODE_ID}"\ndestination = "/q"\n'
    )
    assert manifest.substituted("12345678").connect_headers() == (("host", "/12345678"),)


def test_connect_headers_in_order_with_optional_ones():
    text = render_manifest(
        ["h.example:1"], "/${NODE_ID}", "/q", login="u${NODE_ID}", passcode="p${NODE_ID}"
    )
    # The passcode is not substituted: the profile asks it for host, login and
    # destination only, and swpt_stomp does the same.
    assert parse_manifest(text).substituted("9").connect_headers() == (
        ("host", "/9"),
        ("login", "u9"),
        ("passcode", "p${NODE_ID}"),
    )


def test_substitution_refuses_node_ids_a_connect_header_cannot_carry():
    manifest = parse_manifest('servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\n')
    for bad in ("", "a\nb", "a\rb", "a\x00b"):
        with pytest.raises(ValueError):
            manifest.substituted(bad)


def test_passcode_never_shown():
    secret = "hunter2-${NODE_ID}-zz"
    manifest = parse_manifest(render_manifest(["h.example:1"], "/", "/q", passcode=secret))
    for text in (
        repr(manifest),
        str(manifest),
        repr(manifest.substituted("77")),
        str(manifest.substituted("77")),
        f"{manifest!r} {manifest}",
    ):
        assert "hunter2" not in text
    assert "passcode='<redacted>'" in repr(manifest)
    # Nor in the error for a bad passcode value.
    with pytest.raises(ManifestError) as caught:
        parse_manifest(render_manifest(["h.example:1"], "/", "/q", passcode="hunter2\nx"))
    assert "hunter2" not in str(caught.value) and caught.value.key == "passcode"


def test_choice_is_uniform_among_entries_with_repeats_weighting():
    manifest = parse_manifest(
        'servers = ["a.example:1", "b.example:2", "a.example:1", "a.example:1"]\n'
        'host = "/"\ndestination = "/q"\n'
    )
    rng = random.Random(20260704)
    draws = 40_000
    counts = Counter(choose_server(manifest, rng) for _ in range(draws))
    assert set(counts) == {("a.example", 1), ("b.example", 2)}
    # Expected 3/4 and 1/4; 6 standard deviations (sd = sqrt(n p q) ~ 87) apart from a bug.
    assert abs(counts[("a.example", 1)] - 30_000) < 520


def test_choice_uses_the_given_rng_and_every_entry_is_reachable():
    manifest = parse_manifest(
        'servers = ["a.example:1", "[::1]:2", "10.0.0.1:3"]\nhost = "/"\ndestination = "/q"\n'
    )
    seen = {choose_server(manifest, random.Random(seed)) for seed in range(200)}
    assert seen == {("a.example", 1), ("::1", 2), ("10.0.0.1", 3)}
    assert choose_server(manifest, random.Random(5)) == choose_server(manifest, random.Random(5))


def test_accepts_compares_type_and_subtype_only():
    manifest = parse_manifest(
        'servers = ["h.example:1"]\nhost = "/"\ndestination = "/q"\n'
        'accepted-content-types = ["application/msgpack"]\n'
    )
    assert manifest.content_types() == ("application/msgpack", "application/json")
    assert manifest.accepts("Application/JSON; charset=utf-8")
    assert manifest.accepts("application/msgpack")
    assert not manifest.accepts("text/plain")


@pytest.mark.parametrize(
    "entry, host, port",
    [
        ("example.com:61613", "example.com", 61613),
        ("127.0.0.1:1", "127.0.0.1", 1),
        ("[fe80::1]:65535", "fe80::1", 65535),
        ("xn--bcher-kva.example:443", "xn--bcher-kva.example", 443),
    ],
)
def test_server_address_forms(entry, host, port):
    address = parse_server_address(entry)
    assert (address.host, address.port, str(address)) == (host, port, entry)


def test_bounds_on_size_and_counts():
    with pytest.raises(ManifestError) as caught:
        parse_manifest("x = 1\n" + "#" * 300_000)
    assert caught.value.key is None
    many = render_manifest(["h.example:1"] * 2000, "/", "/q")
    with pytest.raises(ManifestError) as caught:
        parse_manifest(many)
    assert caught.value.key == "servers"
    with pytest.raises(ManifestError) as caught:
        parse_manifest(b'servers = ["h.example:1"]\nhost = "\xff"\ndestination = "/q"\n')
    assert caught.value.key is None and "UTF-8" in caught.value.reason


def test_render_manifest_round_trips_awkward_strings():
    text = render_manifest(
        ["h.example:1"],
        'q"uo\\te\t${NODE_ID}',
        "/d\u00e9st",
        login="\u00fc",
        accepted_content_types=["application/x-a+json"],
    )
    manifest = parse_manifest(text)
    assert manifest.host == 'q"uo\\te\t${NODE_ID}' and manifest.destination == "/d\u00e9st"
    assert manifest.login == "\u00fc" and manifest.accepted_content_types == (
        "application/x-a+json",
    )
