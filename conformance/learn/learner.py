"""Learning one target: its runtime started as certify starts it, AALpy's
KV algorithm over the mapper, a bounded state-prefix equivalence oracle.

The oracle starts from every state of each hypothesis (reached by its
access word) and takes every input from it (transition coverage), each
followed by ``walk_length - 1`` random inputs, then ``walks_per_state``
walks of ``walk_length`` random inputs; the inputs are drawn from a
generator seeded with ``seed``, so that two runs on a deterministic target
ask the same words and learn the same model. It is a conformance test, not
a proof: a state reached only by a word the walks do not draw stays unseen
(docs/learn.md says what the bounds cost).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aalpy.base import Oracle
from aalpy.learning_algs import run_KV

from ..core.run_folder import RunFolder
from ..core.target_spec import Target
from ..core.targets import TargetRuntime, make_work_dir
from ..plugin.protocol_hooks import prepare_runtime
from .alphabet import ProtocolAlphabet
from .defaults import DEFAULT_REPEATS, DEFAULT_SEED, DEFAULT_WALK_LENGTH, DEFAULT_WALKS_PER_STATE
from .mapper import Disagreement, Mapper
from .model import MealyModel


class SeededStatePrefixOracle(Oracle):
    """A state-prefix equivalence oracle asking whole words (module docstring)."""

    def __init__(
        self, alphabet: list[str], sul: Mapper, walks_per_state: int, walk_length: int, seed: int
    ) -> None:
        super().__init__(alphabet, sul)
        self.walks_per_state = walks_per_state
        self.walk_length = walk_length
        self.random = random.Random(seed)
        self.walked: dict[tuple[str, ...], int] = {}
        """Access word -> walks already done from it (over all hypotheses)."""

    def find_cex(self, hypothesis: Any) -> tuple[str, ...] | None:
        states = sorted(
            hypothesis.states,
            key=lambda s: (
                len(hypothesis.get_shortest_path(hypothesis.initial_state, s)),
                s.state_id,
            ),
        )
        for state in states:
            prefix = tuple(hypothesis.get_shortest_path(hypothesis.initial_state, state))
            plan = [(name,) for name in self.alphabet] + [()] * self.walks_per_state
            while self.walked.get(prefix, 0) < len(plan):
                start = plan[self.walked.get(prefix, 0)]
                self.walked[prefix] = self.walked.get(prefix, 0) + 1
                walk = start + tuple(
                    self.random.choice(self.alphabet) for _ in range(self.walk_length - len(start))
                )
                cex = self._check(hypothesis, prefix + walk)
                if cex is not None:
                    return cex
        return None

    def _check(self, hypothesis: Any, word: tuple[str, ...]) -> tuple[str, ...] | None:
        self.num_queries += 1
        self.num_steps += len(word)
        observed = self.sul.query(word)
        hypothesis.reset_to_initial()
        for index, name in enumerate(word):
            if hypothesis.step(name) != observed[index]:
                return word[: index + 1]
        return None


@dataclass
class LearnOptions:
    read_window: float | None = None
    repeats: int = DEFAULT_REPEATS
    walks_per_state: int = DEFAULT_WALKS_PER_STATE
    walk_length: int = DEFAULT_WALK_LENGTH
    seed: int = DEFAULT_SEED
    max_rounds: int = 20


@dataclass
class LearnResult:
    target: str
    protocol: str
    role: str
    model: MealyModel
    read_window: float
    seconds: float
    membership_queries: int
    equivalence_queries: int
    """Test words the equivalence oracle asked (over every hypothesis)."""
    hypotheses: int
    """Hypotheses the oracle checked: the equivalence queries proper."""
    concrete_queries: int
    concrete_steps: int
    cache_hits: int
    unprompted_dropped: int
    disagreements: list[Disagreement] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "protocol": self.protocol,
            "role": self.role,
            "states": len(self.model.states),
            "transitions": len(self.model.transitions),
            "inputs": len(self.model.inputs),
            "membership_queries": self.membership_queries,
            "equivalence_queries": self.equivalence_queries,
            "hypotheses": self.hypotheses,
            "concrete_queries": self.concrete_queries,
            "concrete_steps": self.concrete_steps,
            "cache_hits": self.cache_hits,
            "unprompted_dropped": self.unprompted_dropped,
            "read_window_s": self.read_window,
            "seconds": round(self.seconds, 2),
            "disagreements": [d.to_json() for d in self.disagreements],
        }


@contextmanager
def running_target(target: Target, run_dir: Path, run_id: str) -> Iterator[TargetRuntime]:
    """The target's server started as certify starts it (the protocol's
    prepare, then the launch), stopped and its work dir removed after."""
    logs = RunFolder(run_dir).logs
    logs.mkdir(parents=True, exist_ok=True)
    runtime = TargetRuntime(target, make_work_dir(target.name), logs, run_id=run_id)
    try:
        prepare_runtime(runtime)
        runtime.start_server()
        yield runtime
    finally:
        runtime.stop()


def learn(
    runtime: TargetRuntime, alphabet: ProtocolAlphabet, options: LearnOptions = LearnOptions()
) -> LearnResult:
    """Learn the Mealy machine of the running target over ``alphabet``
    (the inputs its capabilities allow). Raises NondeterministicTarget."""
    inputs = [item.name for item in alphabet.inputs_for(runtime)]
    mapper = Mapper(runtime, alphabet, read_window=options.read_window, repeats=options.repeats)
    oracle = SeededStatePrefixOracle(
        inputs, mapper, options.walks_per_state, options.walk_length, options.seed
    )
    start = time.monotonic()
    try:
        automaton, info = run_KV(
            inputs,
            mapper,
            oracle,
            automaton_type="mealy",
            max_learning_rounds=options.max_rounds,
            cache_and_non_det_check=False,
            return_data=True,
            print_level=0,
        )
    finally:
        mapper.close()
    seconds = time.monotonic() - start
    stats = mapper.stats
    return LearnResult(
        target=runtime.target.name,
        protocol=alphabet.protocol,
        role=alphabet.role,
        model=MealyModel.from_aalpy(automaton, tuple(inputs)),
        read_window=mapper.read_window,
        seconds=seconds,
        membership_queries=stats.membership_queries - oracle.num_queries,
        equivalence_queries=oracle.num_queries,
        hypotheses=int(info["learning_rounds"]) + 1,
        concrete_queries=stats.concrete_queries,
        concrete_steps=stats.concrete_steps,
        cache_hits=stats.cache_hits,
        unprompted_dropped=stats.unprompted_dropped,
        disagreements=list(stats.disagreements),
    )
