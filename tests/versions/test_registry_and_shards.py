"""Release order and ranges (PyPI's PEP 440, npm's semver) and the shard
partition (docs/versions.md): no registry is asked here."""

from __future__ import annotations

import argparse
import random

import pytest

from conformance.versions.registry import RangeError, SemVer, select
from conformance.versions.shard import parse_shard, partition, shard_of

PYPI = ["4.1.9", "4.1.10", "3.1.7", "8.0.0", "8.1.0rc1", "8.1.0", "8.2.0", "9.0.0", "10.0.0a1",
        "not-a-version", "4.1.24"]  # fmt: skip


def test_pypi_order_is_pep440_and_pre_releases_are_left_out():
    assert select("pypi", PYPI) == ["3.1.7", "4.1.9", "4.1.10", "4.1.24", "8.0.0", "8.1.0",
                                    "8.2.0", "9.0.0"]  # fmt: skip
    assert select("pypi", PYPI, ">=8,<9") == ["8.0.0", "8.1.0", "8.2.0"]
    assert select("pypi", PYPI, ">=8,<9", pre=True) == ["8.0.0", "8.1.0rc1", "8.1.0", "8.2.0"]
    assert select("pypi", PYPI, "==10.0.0a1") == ["10.0.0a1"]  # named exactly: taken
    assert select("pypi", PYPI, ">=11") == []
    with pytest.raises(RangeError):
        select("pypi", PYPI, "between 8 and 9")


SEMVER_SPEC_ORDER = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                     "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]  # fmt: skip
"""semver.org, section 11's example, in its order."""


def test_npm_order_is_semver():
    shuffled = SEMVER_SPEC_ORDER[:]
    random.Random(7).shuffle(shuffled)
    assert select("npm", shuffled, pre=True) == SEMVER_SPEC_ORDER
    assert select("npm", ["0.10.0", "0.9.1", "0.1.1", "1.0.0", "0.26.0", "v2"]) == [
        "0.1.1", "0.9.1", "0.10.0", "0.26.0", "1.0.0"
    ]  # fmt: skip
    assert SemVer.parse("1.0.0+build.5") == SemVer.parse("1.0.0")


def test_npm_ranges():
    versions = ["1.1.5", "1.3.0", "1.3.11", "1.4.0-beta.1", "1.4.0", "1.4.2", "1.5.0", "2.0.0"]
    assert select("npm", versions, ">=1.3,<1.5") == ["1.3.0", "1.3.11", "1.4.0", "1.4.2"]
    assert select("npm", versions, ">=1.3 <1.5", pre=True) == [
        "1.3.0", "1.3.11", "1.4.0-beta.1", "1.4.0", "1.4.2"
    ]  # fmt: skip
    assert select("npm", versions, ">1.4.2") == ["1.5.0", "2.0.0"]
    assert select("npm", versions, "<=1.3.0") == ["1.1.5", "1.3.0"]
    assert select("npm", versions, "=1.4.0-beta.1") == ["1.4.0-beta.1"]
    assert select("npm", versions, "1.5.0") == ["1.5.0"]
    for bad in ("~1.2", ">=one", ""):
        with pytest.raises(RangeError):
            select("npm", versions, bad or " , ")


@pytest.mark.parametrize("text, parsed", [("1/1", (1, 1)), ("3/8", (3, 8)), (" 8 / 8 ", (8, 8))])
def test_shard_text(text, parsed):
    assert parse_shard(text) == parsed


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "2", "a/b", "-1/3"])
def test_shard_text_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_shard(text)


NAMES = [f"stomp-py@{n}" for n in range(55)] + [f"stompit@0.{n}.0" for n in range(15)]
WEIGHT = {"stomp-py": 63.0, "stompit": 63.0, "ssb-server": 120.0, "ilp-plugin-btp": 40.0}


def weight(name: str) -> float:
    return WEIGHT[name.split("@")[0]]


@pytest.mark.parametrize("shards", [1, 2, 3, 8, 13, 100])
def test_shards_are_disjoint_complete_and_balanced(shards):
    items = (
        NAMES
        + [f"ssb-server@{n}.0.0" for n in range(15)]
        + [f"ilp-plugin-btp@1.{n}.0" for n in range(20)]
    )
    parts = partition(items, shards, str, weight)
    flat = [item for part in parts for item in part]
    assert sorted(flat) == sorted(items) and len(flat) == len(set(flat))  # disjoint, complete
    loads = [sum(weight(i) for i in part) for part in parts]
    assert max(loads) - min(loads) <= max(WEIGHT.values())  # within one target
    for part in parts:
        assert part == [i for i in items if i in part]  # each in the list's order


def test_shards_do_not_depend_on_the_order_given():
    shuffled = NAMES[:]
    random.Random(3).shuffle(shuffled)
    for k in range(1, 6):
        assert sorted(shard_of(NAMES, (k, 5), str, weight)) == sorted(
            shard_of(shuffled, (k, 5), str, weight)
        )


def test_equal_targets_are_dealt_round_robin():
    names = [f"t{n:02d}" for n in range(10)]
    assert shard_of(names, (1, 3), str) == ["t00", "t03", "t06", "t09"]
    assert shard_of(names, (3, 3), str) == ["t02", "t05", "t08"]


def test_unreachable_registry_is_a_clear_error(monkeypatch):
    from conformance.versions import registry

    monkeypatch.setattr(registry, "PYPI_URL", "http://127.0.0.1:9/pypi/{package}/json")
    with pytest.raises(registry.RegistryError, match=r"registry unreachable: PyPI \(http://127"):
        registry.releases("pypi", "stomp.py")
