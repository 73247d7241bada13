"""SMP 2.1 bodies: reference_impl/stomp/smp.py against vectors/stomp/smp.json,
the mutation catalog against every field of every type, and the hypothesis
strategies (valid messages validate; each invalid one is refused naming its
field and reason, and nothing else)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ..fuzz_budget import examples

from reference_impl.stomp import smp
from reference_impl.stomp import smp_strategies as ss

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_PATH = REPO_ROOT / "vectors" / "stomp" / "smp.json"
GENERATOR_PATH = REPO_ROOT / "scripts" / "gen_stomp_vectors_smp.py"
PROFILE_PATH = REPO_ROOT.parent / "shared" / "specs" / "stomp" / "swaptacular-stomp-transport.txt"

VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
VALID = VECTORS["valid"]
INVALID = VECTORS["invalid"]
TYPES = sorted(smp.MESSAGE_TYPES)


def by_id(cases: list[dict]) -> dict:
    return {"argvalues": cases, "ids": [case["id"] for case in cases]}


def body_bytes(vector: dict) -> bytes:
    return (
        bytes.fromhex(vector["body_hex"])
        if "body_hex" in vector
        else vector["body"].encode("utf-8")
    )


def test_generator_reproduces_the_committed_file():
    spec = importlib.util.spec_from_file_location("gen_stomp_vectors_smp", GENERATOR_PATH)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.render(generator.document()) == VECTORS_PATH.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- vectors


@pytest.mark.parametrize("vector", **by_id(VALID))
def test_valid_vector_is_accepted(vector):
    assert smp.validate_body(vector["type"], body_bytes(vector)) == []
    parsed = json.loads(vector["body"])
    assert [p.reason for p in smp.should_problems(vector["type"], parsed)] == vector["should"]


@pytest.mark.parametrize("vector", **by_id(INVALID))
def test_invalid_vector_is_refused_naming_its_field(vector):
    problems = smp.validate_body(vector["type"], body_bytes(vector))
    assert [(p.field, p.reason) for p in problems] == [(vector["field"], vector["reason"])]
    assert problems[0].basis == vector["basis"]
    assert vector["reason"] in VECTORS["reasons"]


def test_every_field_of_every_type_has_invalid_vectors():
    named = {(v["type"], v["field"]) for v in INVALID}
    for name, message_type in smp.MESSAGE_TYPES.items():
        for field in ("type", *message_type.field_names):
            assert (name, field) in named, (name, field)


def test_every_reason_has_a_vector_and_a_basis():
    used = {v["reason"] for v in INVALID}
    assert used == set(smp.REASONS)
    for basis, _meaning in smp.REASONS.values():
        assert basis in {smp.SMP_TEXT, smp.JSON_BASIS, smp.JSON_MAPPING, smp.HARNESS_BOUND}


def test_every_type_has_example_and_bound_vectors():
    ids = {v["id"] for v in VALID}
    for name in TYPES:
        assert {f"example-{name}", f"upper-bounds-{name}", f"lower-bounds-{name}"} <= ids


# --------------------------------------------------------------------------- the table


def test_the_table_has_the_profiles_ten_types():
    # PROFILE:36-47 lists the types a SEND may carry; SMP 2.1 defines exactly these.
    profile = PROFILE_PATH.read_text(encoding="utf-8") if PROFILE_PATH.exists() else None
    listed = {
        "ConfigureAccount",
        "PrepareTransfer",
        "FinalizeTransfer",
        "RejectedConfig",
        "RejectedTransfer",
        "PreparedTransfer",
        "FinalizedTransfer",
        "AccountUpdate",
        "AccountPurge",
        "AccountTransfer",
    }
    assert set(smp.MESSAGE_TYPES) == listed
    if profile is not None:
        for name in listed:
            assert f"**{name}**" in profile
    assert set(smp.INCOMING_TYPES) == {"ConfigureAccount", "PrepareTransfer", "FinalizeTransfer"}


def test_every_field_and_rule_cites_the_text():
    for message_type in smp.MESSAGE_TYPES.values():
        assert message_type.cite.startswith("SMP:")
        assert len(set(message_type.field_names)) == len(message_type.fields)
        assert "debtor_id" in message_type.field_names and "creditor_id" in message_type.field_names
        for spec in message_type.fields:
            assert "SMP:" in spec.cite, spec
            assert spec.kind in {"int", "float", "string", "date-time", "date", "bytes"}
            if spec.kind == "int":
                assert smp.MIN_INT64 <= spec.lo <= spec.hi <= smp.MAX_INT64
        for rule in (*message_type.rules, *message_type.should):
            assert rule.at_fault in message_type.field_names
            assert set(rule.reads) <= set(message_type.field_names)
            assert "SMP:" in rule.cite


@pytest.mark.parametrize("type_name", TYPES)
def test_example_is_valid_and_follows_every_should(type_name):
    message = smp.example_message(type_name)
    assert message["type"] == type_name
    assert smp.validate_message(type_name, message) == []
    assert smp.should_problems(type_name, message) == []
    assert smp.validate_body(type_name, smp.encode_message(message)) == []
    message["debtor_id"] = "changed"
    assert smp.example_message(type_name)["debtor_id"] != "changed"  # a fresh copy each time


def catalog(type_name: str):
    """Every (field, mutation-or-rule) the strategies and the generator draw from."""
    message_type = smp.MESSAGE_TYPES[type_name]
    for mutation in ss.type_mutations(type_name):
        yield "type", mutation
    for spec in message_type.fields:
        for mutation in ss.field_mutations(spec):
            yield spec.name, mutation
    for rule in message_type.rules:
        yield rule.at_fault, rule


@pytest.mark.parametrize("type_name", TYPES)
def test_every_catalog_entry_breaks_exactly_one_rule(type_name):
    base = smp.example_message(type_name)
    count = 0
    for field, how in catalog(type_name):
        if isinstance(how, ss.Mutation):
            broken, reason = ss.apply_mutation(base, field, how), how.reason
        else:
            broken = dict(base)
            ss.RULE_BREAKERS[how.name](broken)
            reason = smp.INCONSISTENT
        problems = smp.validate_message(type_name, broken)
        assert [(p.field, p.reason) for p in problems] == [(field, reason)], (field, how)
        count += 1
    assert count >= 3 + 2 * len(smp.MESSAGE_TYPES[type_name].fields)


# --------------------------------------------------------------------------- specific rules


def test_byte_bounds_count_utf8_bytes_not_characters():
    message = smp.example_message("ConfigureAccount")
    message["config_data"] = "\u00e9" * 1000  # 2000 bytes: at the bound
    assert smp.validate_message("ConfigureAccount", message) == []
    message["config_data"] = "\u00e9" * 1000 + "a"  # 2001 bytes, 1001 characters
    assert [(p.field, p.reason) for p in smp.validate_message("ConfigureAccount", message)] == [
        ("config_data", smp.TOO_LONG)
    ]


def test_iri_bound_counts_code_points():
    message = smp.example_message("AccountUpdate")
    message["debtor_info_iri"] = "\U0001f600" * 200  # 800 UTF-8 bytes, 200 characters
    assert smp.validate_message("AccountUpdate", message) == []


def test_cross_rules_are_skipped_when_a_field_they_read_is_invalid():
    message = smp.example_message("PrepareTransfer")
    message["min_locked_amount"] = -5  # invalid on its own
    message[
        "max_locked_amount"
    ] = -10  # max < min, but the rule reads an invalid field: not reported
    assert [(p.field, p.reason) for p in smp.validate_message("PrepareTransfer", message)] == [
        ("min_locked_amount", smp.OUT_OF_RANGE)
    ]
    message["min_locked_amount"] = 0  # now both valid: the rule speaks
    assert [(p.field, p.reason) for p in smp.validate_message("PrepareTransfer", message)] == [
        ("max_locked_amount", smp.INCONSISTENT)
    ]


def test_booleans_are_not_numbers():
    message = smp.example_message("ConfigureAccount")
    message["seqnum"] = True
    message["negligible_amount"] = False
    assert {(p.field, p.reason) for p in smp.validate_message("ConfigureAccount", message)} == {
        ("seqnum", smp.WRONG_TYPE),
        ("negligible_amount", smp.WRONG_TYPE),
    }


def test_huge_integer_literal_in_a_float_field_is_not_finite():
    body = smp.encode_message(smp.example_message("ConfigureAccount")).replace(
        b'"negligible_amount":2.0', b'"negligible_amount":' + b"9" * 400
    )
    assert [(p.field, p.reason) for p in smp.validate_body("ConfigureAccount", body)] == [
        ("negligible_amount", smp.NOT_FINITE)
    ]


@pytest.mark.parametrize(
    "text,reason",
    [
        ("2024-05-20T10:00:00+00:00", None),
        ("2024-05-20T10:00:00Z", None),
        ("2024-05-20T10:00:00.5-12:00", None),
        ("2024-05-20T10:00+01", None),
        ("2024-05-20 10:00:00+0100", None),
        ("2024-05-20T10:00:00", smp.NO_UTC_OFFSET),
        ("2024-05-20t10:00:00Z", smp.BAD_TIMESTAMP),
        ("2024-05-20T10:00:00z", smp.BAD_TIMESTAMP),
        ("2024-5-20T10:00:00Z", smp.BAD_TIMESTAMP),
        (
            "\u0662\u0660\u0662\u0664-05-20T10:00:00Z",
            smp.BAD_TIMESTAMP,
        ),  # Arabic-Indic digits are not ISO 8601
        ("2023-02-29T00:00:00Z", smp.BAD_TIMESTAMP),
        ("2024-05-20T10:60:00Z", smp.BAD_TIMESTAMP),
        ("2024-05-20T10:00:00+05:60", smp.BAD_TIMESTAMP),
        ("2024-05-20T10:00:00.1234567890123Z", smp.BAD_TIMESTAMP),
    ],
)
def test_date_time_forms(text, reason):
    assert smp.parse_date_time(text)[0] == reason


def test_problem_text_and_basis():
    problem = smp.SmpProblem("ts", smp.NO_UTC_OFFSET, "no Z")
    assert str(problem) == "ts: timestamp without UTC offset (no Z)"
    assert problem.basis == smp.JSON_MAPPING
    assert smp.SmpProblem("type", smp.MISSING).basis == smp.JSON_MAPPING
    assert smp.SmpProblem("debtor_id", smp.MISSING).basis == smp.SMP_TEXT


def test_validate_message_refuses_non_objects_and_unknown_types():
    assert [(p.field, p.reason) for p in smp.validate_message("AccountPurge", [1])] == [
        (smp.BODY, smp.NOT_OBJECT)
    ]
    assert [(p.field, p.reason) for p in smp.validate_message("Nope", {})] == [
        ("type", smp.UNKNOWN_TYPE)
    ]
    message = smp.example_message("AccountPurge")
    del message["type"]
    assert smp.validate_message("AccountPurge", message, check_type_member=False) == []


def test_validate_body_without_type_header():
    assert [(p.field, p.reason) for p in smp.validate_body(None, b"{}")] == [("type", smp.MISSING)]


def test_body_bound_is_a_parameter():
    body = smp.encode_message(smp.example_message("AccountPurge"))
    assert smp.validate_body("AccountPurge", body, max_bytes=len(body)) == []
    assert [p.reason for p in smp.validate_body("AccountPurge", body, max_bytes=len(body) - 1)] == [
        smp.BODY_TOO_LARGE
    ]


# --------------------------------------------------------------------------- strategies

SETTINGS = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(ss.valid_messages())
def test_valid_messages_validate_as_objects_and_as_bodies(message):
    assert smp.validate_message(message["type"], message) == []
    body = ss.body_text(message).encode("utf-8")
    assert smp.validate_body(message["type"], body) == []
    assert json.loads(body) == message


@SETTINGS
@given(st.sampled_from(TYPES).flatmap(lambda t: st.tuples(st.just(t), ss.valid_messages(t))))
def test_valid_messages_of_one_type_have_that_type(pair):
    type_name, message = pair
    assert message["type"] == type_name
    assert set(message) == {"type", *smp.MESSAGE_TYPES[type_name].field_names}


@SETTINGS
@given(st.sampled_from(TYPES).flatmap(lambda t: st.tuples(st.just(t), ss.invalid_messages(t))))
def test_invalid_messages_are_refused_naming_their_field(pair):
    type_name, (message, field, reason) = pair
    assert reason in smp.REASONS
    problems = smp.validate_message(type_name, message)
    assert [(p.field, p.reason) for p in problems] == [(field, reason)]
    if not any(isinstance(v, float) and math.isnan(v) for v in message.values()):
        # As a body too (NaN has no JSON form): the same single problem.
        assert [
            (p.field, p.reason)
            for p in smp.validate_body(type_name, ss.body_text(message).encode())
        ] == [(field, reason)]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ss.invalid_messages())
def test_invalid_messages_of_any_type(triple):
    message, field, reason = triple
    # The type member may be the broken field, so find the type whose rules give this one problem.
    matches = [
        t
        for t in TYPES
        if [(p.field, p.reason) for p in smp.validate_message(t, message)] == [(field, reason)]
    ]
    assert matches


@pytest.mark.parametrize("type_name", TYPES)
def test_invalid_messages_of_each_type(type_name):
    @settings(
        max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(ss.invalid_messages(type_name))
    def check(triple):
        message, field, reason = triple
        problems = smp.validate_message(type_name, message)
        assert [(p.field, p.reason) for p in problems] == [(field, reason)]

    check()


def test_strategies_refuse_unknown_types():
    with pytest.raises(ValueError):
        ss.valid_messages("Nope")
    with pytest.raises(ValueError):
        ss.invalid_messages("Nope")
