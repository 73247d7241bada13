"""A learned Mealy machine as data: canonical JSON, DOT and SVG.

States are named ``s0`` (initial), ``s1``, ... in the order a breadth-first
walk from the initial state meets them, inputs taken in the alphabet's
order. Two machines with the same behaviour, learned minimal, therefore
have the same JSON: equality of models is equality of their data, which
is what the nightly compares to show that a model changed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "conformance-learned-mealy/1"
DIFF_COLOUR = "red"
"""Transitions that differ from the reference's model."""


@dataclass(frozen=True)
class MealyModel:
    inputs: tuple[str, ...]
    states: tuple[str, ...]
    initial: str
    transitions: dict[tuple[str, str], tuple[str, str]]
    """(state, input) -> (next state, output word)."""

    @classmethod
    def from_aalpy(cls, automaton: Any, inputs: tuple[str, ...]) -> MealyModel:
        names: dict[Any, str] = {automaton.initial_state: "s0"}
        order = [automaton.initial_state]
        queue = deque(order)
        transitions: dict[tuple[str, str], tuple[str, str]] = {}
        while queue:
            state = queue.popleft()
            for name in inputs:
                target = state.transitions[name]
                if target not in names:
                    names[target] = f"s{len(names)}"
                    order.append(target)
                    queue.append(target)
                transitions[(names[state], name)] = (names[target], str(state.output_fun[name]))
        return cls(tuple(inputs), tuple(names[s] for s in order), "s0", transitions)

    def step(self, state: str, name: str) -> tuple[str, str]:
        return self.transitions[(state, name)]

    def run(self, word: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        state, outputs = self.initial, []
        for name in word:
            state, output = self.step(state, name)
            outputs.append(output)
        return tuple(outputs)

    def access(self) -> dict[str, tuple[str, ...]]:
        """Each state's shortest input word from the initial state (first in
        the alphabet's order)."""
        words = {self.initial: ()}
        queue = deque([self.initial])
        while queue:
            state = queue.popleft()
            for name in self.inputs:
                target, _ = self.step(state, name)
                if target not in words:
                    words[target] = words[state] + (name,)
                    queue.append(target)
        return words

    # -- data
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "inputs": list(self.inputs),
            "states": list(self.states),
            "initial": self.initial,
            "transitions": [
                {"from": state, "input": name, "to": target, "output": output}
                for (state, name), (target, output) in self.transitions.items()
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MealyModel:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a learned model ({FORMAT}): format {data.get('format')!r}")
        return cls(
            tuple(data["inputs"]),
            tuple(data["states"]),
            data["initial"],
            {(t["from"], t["input"]): (t["to"], t["output"]) for t in data["transitions"]},
        )

    @classmethod
    def load(cls, path: Path) -> MealyModel:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def restricted(self, inputs: tuple[str, ...]) -> MealyModel:
        """The same machine over a subset of its inputs (the states reachable with them)."""
        words = {self.initial}
        queue = deque([self.initial])
        while queue:
            state = queue.popleft()
            for name in inputs:
                target, _ = self.step(state, name)
                if target not in words:
                    words.add(target)
                    queue.append(target)
        return MealyModel(
            inputs,
            tuple(s for s in self.states if s in words),
            self.initial,
            {(s, i): v for (s, i), v in self.transitions.items() if s in words and i in inputs},
        )

    # -- pictures
    def to_dot(self, title: str, differing: frozenset[tuple[str, str]] = frozenset()) -> str:
        """Graphviz: one edge per (state, next state) listing its ``input /
        output`` labels; transitions in ``differing`` (state, input) get an
        edge of their own in :data:`DIFF_COLOUR`."""
        lines = [
            "digraph learned {",
            f"  label={_quote(title)}; labelloc=t; rankdir=LR;",
            '  node [shape=circle, fontname="Helvetica"];',
            '  edge [fontname="Helvetica", fontsize=10];',
            "  __start [shape=point];",
            f"  __start -> {self.initial};",
        ]
        lines += [f"  {state};" for state in self.states]
        grouped: dict[tuple[str, str, bool], list[tuple[str, str]]] = {}
        for (state, name), (target, output) in self.transitions.items():
            key = (state, target, (state, name) in differing)
            grouped.setdefault(key, []).append((name, output))
        for (state, target, differs), pairs in grouped.items():
            if len(pairs) == len(self.inputs) and len({output for _, output in pairs}) == 1:
                labels = [f"every input / {pairs[0][1]}"]  # a sink: one line, not one per input
            else:
                labels = [f"{name} / {output}" for name, output in pairs]
            style = f", color={DIFF_COLOUR}, fontcolor={DIFF_COLOUR}, penwidth=2" if differs else ""
            lines.append(f"  {state} -> {target} [label={_quote(chr(10).join(labels))}{style}];")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\l") + '\\l"'


def write_svg(dot_file: Path, svg_file: Path) -> bool:
    """``dot -Tsvg`` when Graphviz is installed (scripts/install-graphviz.sh);
    False when it is not."""
    dot = shutil.which("dot")
    if dot is None:
        return False
    subprocess.run([dot, "-Tsvg", str(dot_file), "-o", str(svg_file)], check=True, timeout=60)
    return True
