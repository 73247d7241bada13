"""The learned model as data, its picture, and the diff against the
reference's (conformance/learn/model.py, diff.py): no target involved."""

from __future__ import annotations

import json

from conformance.learn.diff import equivalent, separations
from conformance.learn.model import DIFF_COLOUR, MealyModel


def machine(rows: list[tuple[str, str, str, str]], inputs: tuple[str, ...]) -> MealyModel:
    """(state, input, next state, output) rows; the first row's state is initial."""
    return MealyModel(
        inputs,
        tuple(dict.fromkeys(row[0] for row in rows)),
        rows[0][0],
        {(s, i): (t, o) for s, i, t, o in rows},
    )


INPUTS = ("hello", "ping", "garbage")
REFERENCE = machine(
    [
        ("a", "hello", "b", "HELLO"),
        ("a", "ping", "z", "ERR+close"),
        ("a", "garbage", "z", "close"),
        ("b", "hello", "b", "ERR"),
        ("b", "ping", "b", "PONG"),
        ("b", "garbage", "z", "close"),
        ("z", "hello", "z", "closed"),
        ("z", "ping", "z", "closed"),
        ("z", "garbage", "z", "closed"),
    ],
    INPUTS,
)


def test_a_model_round_trips_through_its_json() -> None:
    data = json.loads(json.dumps(REFERENCE.to_json()))
    again = MealyModel.from_json(data)
    assert again == REFERENCE
    assert again.run(("hello", "ping", "garbage", "ping")) == ("HELLO", "PONG", "close", "closed")


def test_equal_behaviour_is_equal_data_whatever_the_state_names() -> None:
    """Canonical names come from the breadth-first walk (from_aalpy); two
    machines built with other names but the same behaviour compare equal
    through the diff, and the diff finds nothing."""
    renamed = machine(
        [(row[0].upper(), row[1], row[2].upper(), row[3]) for row in _rows(REFERENCE)],
        INPUTS,
    )
    assert equivalent(renamed, REFERENCE)
    assert separations(renamed, REFERENCE) == []


def _rows(model: MealyModel) -> list[tuple[str, str, str, str]]:
    return [(s, i, t, o) for (s, i), (t, o) in model.transitions.items()]


def test_the_diff_gives_the_shortest_separating_word_first() -> None:
    # A faulty node: after hello it serves ping, then stays open on garbage.
    faulty_rows = [
        row if (row[0], row[1]) != ("b", "garbage") else ("b", "garbage", "b", "silence")
        for row in _rows(REFERENCE)
    ]
    faulty_rows = [
        row if (row[0], row[1]) != ("a", "ping") else ("a", "ping", "z", "PONG")
        for row in faulty_rows
    ]
    faulty = machine(faulty_rows, INPUTS)
    found = separations(faulty, REFERENCE)
    assert [s.word for s in found] == [("ping",), ("hello", "garbage")]
    first = found[0]
    assert first.target_outputs == ("PONG",) and first.reference_outputs == ("ERR+close",)
    assert first.target_transition == ("a", "ping")
    assert found[1].target_outputs == ("HELLO", "silence")


def test_differing_transitions_are_drawn_in_colour() -> None:
    dot = REFERENCE.to_dot("title", frozenset({("b", "ping")}))
    coloured = [line for line in dot.splitlines() if DIFF_COLOUR in line]
    assert len(coloured) == 1 and "ping / PONG" in coloured[0]
    assert dot.startswith("digraph") and "__start -> a" in dot


def test_a_model_over_fewer_inputs_keeps_only_what_they_reach() -> None:
    small = REFERENCE.restricted(("garbage",))
    assert small.states == ("a", "z")
    assert set(small.transitions) == {("a", "garbage"), ("z", "garbage")}
