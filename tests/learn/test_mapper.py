"""The mapper's cache, its shortcut past a close, and its repetition where
answers disagree (conformance/learn/mapper.py), with scripted concrete runs
in place of a target."""

from __future__ import annotations

from collections import deque

import pytest

from conformance.learn.alphabet import CLOSED
from conformance.learn.mapper import Mapper, NondeterministicTarget, StepRecord


class ScriptedMapper(Mapper):
    """Concrete runs answered from ``script`` (word -> queue of outputs)."""

    def __init__(self, script: dict[tuple[str, ...], list[tuple[str, ...]]]) -> None:
        self.script = {word: deque(answers) for word, answers in script.items()}
        self.ran: list[tuple[str, ...]] = []
        # No runtime, no alphabet: run() is replaced.
        super().__init__(runtime=None, alphabet=_Alphabet(), repeats=3)  # type: ignore[arg-type]

    def run(self, word: tuple[str, ...]) -> list[StepRecord]:
        self.ran.append(word)
        answers = self.script[word]
        outputs = answers[0] if len(answers) == 1 else answers.popleft()
        return [StepRecord(i, b"", b"", o, 0) for i, o in zip(word, outputs)]


class _Alphabet:
    read_window = 0.1

    def tls_context(self, runtime: object) -> None:
        return None


def test_a_word_is_run_once_and_its_prefixes_are_cached() -> None:
    mapper = ScriptedMapper({("a", "b"): [("A", "B")]})
    assert mapper.query(("a", "b")) == ["A", "B"]
    assert mapper.query(("a",)) == ["A"]
    assert mapper.query(("a", "b")) == ["A", "B"]
    assert mapper.ran == [("a", "b")]
    assert mapper.stats.cache_hits == 2


def test_nothing_is_sent_after_the_target_closed() -> None:
    mapper = ScriptedMapper({("a",): [("ERR+close",)]})
    mapper.query(("a",))
    assert mapper.query(("a", "b", "c")) == ["ERR+close", CLOSED, CLOSED]
    assert mapper.ran == [("a",)]


def test_a_disagreement_that_repeats_settle_is_recorded_not_learnt() -> None:
    mapper = ScriptedMapper(
        {
            ("a",): [("A",)],
            # Once late (silence), then three times as the cache has it.
            ("a", "b"): [("silence", "A+B"), ("A", "B"), ("A", "B"), ("A", "B")],
        }
    )
    mapper.query(("a",))
    assert mapper.query(("a", "b")) == ["A", "B"]
    assert len(mapper.stats.disagreements) == 1
    recorded = mapper.stats.disagreements[0]
    assert recorded.seen == ("silence",) and recorded.cached == ("A",)


def test_answers_that_keep_disagreeing_stop_the_learning_with_every_answer() -> None:
    mapper = ScriptedMapper(
        {
            ("a",): [("A",)],
            ("a", "b"): [("silence", "B"), ("A", "B"), ("silence", "B"), ("A", "B")],
        }
    )
    mapper.query(("a",))
    with pytest.raises(NondeterministicTarget) as caught:
        mapper.query(("a", "b"))
    assert ("silence", "B") in caught.value.answers and ("A", "B") in caught.value.answers
    assert "a · b" in str(caught.value)
