"""The difference between a target's learned model and the reference's.

Both machines are walked together, breadth first from their initial
states over the inputs they share (alphabet order): the first input on
which their outputs differ, from a pair of states reached by the shortest
word, gives a *separating sequence*: that word and the input. Every pair
of states reached and every input is looked at once, so each differing
transition of the target's model shows once, reached by its shortest
word; the list is ordered shortest first.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .model import MealyModel


@dataclass(frozen=True)
class Separation:
    word: tuple[str, ...]
    """Inputs from a fresh connection; the outputs differ on the last."""
    target_outputs: tuple[str, ...]
    reference_outputs: tuple[str, ...]
    target_transition: tuple[str, str]
    """(state of the target's model, input) where it differs."""
    reference_transition: tuple[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "word": list(self.word),
            "target_outputs": list(self.target_outputs),
            "reference_outputs": list(self.reference_outputs),
            "target_transition": list(self.target_transition),
            "reference_transition": list(self.reference_transition),
        }


def separations(target: MealyModel, reference: MealyModel) -> list[Separation]:
    """Every separating sequence of ``target`` from ``reference`` (module
    docstring), shortest first; empty when the models agree on every word
    over their common inputs."""
    shared = tuple(name for name in reference.inputs if name in target.inputs)
    start = (target.initial, reference.initial)
    words: dict[tuple[str, str], tuple[str, ...]] = {start: ()}
    queue = deque([start])
    found: list[Separation] = []
    while queue:
        pair = queue.popleft()
        t_state, r_state = pair
        word = words[pair]
        for name in shared:
            t_next, t_out = target.step(t_state, name)
            r_next, r_out = reference.step(r_state, name)
            if t_out != r_out:
                if any(seen.target_transition == (t_state, name) for seen in found):
                    continue  # the same transition of the target, from a longer word
                separating = word + (name,)
                found.append(
                    Separation(
                        separating,
                        target.run(separating),
                        reference.run(separating),
                        (t_state, name),
                        (r_state, name),
                    )
                )
                continue  # past a difference, what follows is the difference's consequence
            following = (t_next, r_next)
            if following not in words:
                words[following] = word + (name,)
                queue.append(following)
    return found


def equivalent(target: MealyModel, reference: MealyModel) -> bool:
    return not separations(target, reference)
