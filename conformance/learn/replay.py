"""Separating sequences replayed concretely, and saved as replay files.

A replay file holds the input word, the outputs the target's model and the
reference's model give it, the cases it touches (or that it is a coverage
gap), and each concrete run: per input the bytes sent and received (hex)
and the output word. :func:`replay_file` runs a saved word again on a
target and says whether it reproduces the target's outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.target_runtime import TargetRuntime
from .alphabet import ProtocolAlphabet
from .diff import Separation
from .defaults import DEFAULT_REPLAYS
from .mapper import Mapper, StepRecord

FORMAT = "conformance-learn-replay/1"


@dataclass
class Replay:
    protocol: str
    role: str
    target: str
    separation: Separation
    cases: tuple[str, ...]
    runs: list[list[StepRecord]]

    @property
    def coverage_gap(self) -> bool:
        return not self.cases

    @property
    def reproduced(self) -> int:
        """Runs whose outputs are the target model's."""
        expected = self.separation.target_outputs
        return sum(Mapper.outputs(run) == expected for run in self.runs)

    def label(self) -> str:
        """The file's name: the first case it touches, or ``coverage-gap-<input>``."""
        if self.cases:
            return self.cases[0]
        return f"coverage-gap-{self.separation.word[-1]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "protocol": self.protocol,
            "role": self.role,
            "target": self.target,
            **self.separation.to_json(),
            "cases": list(self.cases),
            "coverage_gap": self.coverage_gap,
            "reproduced": f"{self.reproduced}/{len(self.runs)}",
            "runs": [
                {
                    "outputs": list(Mapper.outputs(run)),
                    "steps": [record.to_json() for record in run],
                }
                for run in self.runs
            ],
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")


def replay_separation(
    runtime: TargetRuntime,
    alphabet: ProtocolAlphabet,
    separation: Separation,
    times: int = DEFAULT_REPLAYS,
    read_window: float | None = None,
) -> Replay:
    mapper = Mapper(runtime, alphabet, read_window=read_window)
    try:
        runs = [mapper.run(separation.word) for _ in range(times)]
    finally:
        mapper.close()
    last = separation.word[-1]
    cases = alphabet.cases_for(
        last, separation.target_outputs[-1], separation.reference_outputs[-1]
    )
    return Replay(alphabet.protocol, alphabet.role, runtime.target.name, separation, cases, runs)


@dataclass
class FileReplay:
    word: tuple[str, ...]
    expected: tuple[str, ...]
    """The target model's outputs saved in the file."""
    reference: tuple[str, ...]
    seen: list[tuple[str, ...]]

    @property
    def reproduced(self) -> bool:
        return bool(self.seen) and all(outputs == self.expected for outputs in self.seen)


def replay_file(
    path: Path,
    runtime: TargetRuntime,
    alphabet: ProtocolAlphabet,
    times: int = 1,
    read_window: float | None = None,
) -> FileReplay:
    """Run the word of a replay file ``times`` on ``runtime``'s target."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a replay file ({FORMAT})")
    word = tuple(data["word"])
    mapper = Mapper(runtime, alphabet, read_window=read_window)
    try:
        seen = [Mapper.outputs(mapper.run(word)) for _ in range(times)]
    finally:
        mapper.close()
    return FileReplay(word, tuple(data["target_outputs"]), tuple(data["reference_outputs"]), seen)
