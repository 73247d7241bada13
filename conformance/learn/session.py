"""One ``conformance learn`` of a target: learn the reference node's model,
learn the target's, diff them, replay each separating sequence on the
target, and write everything into the run folder (RunFolder.learn_dir).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.allure_result import Attachment, write_allure_result
from ..core.run_folder import RunFolder
from ..core.target_spec import Target
from .alphabet import ProtocolAlphabet
from .diff import Separation, separations
from .learner import LearnOptions, LearnResult, learn, running_target
from .model import MealyModel, write_svg
from .defaults import DEFAULT_REPLAYS, REFERENCE_TARGET
from .replay import Replay, replay_separation


def reference_name(protocol: str) -> str:
    return REFERENCE_TARGET.format(protocol=protocol)


@dataclass
class LearnRun:
    result: LearnResult
    reference: MealyModel
    reference_name: str
    reference_result: LearnResult | None
    separations: list[Separation]
    replays: list[Replay] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            **self.result.figures(),
            "reference": self.reference_name,
            "reference_figures": (
                self.reference_result.figures() if self.reference_result is not None else None
            ),
            "equal_to_reference": not self.separations,
            "separations": [
                {
                    **separation.to_json(),
                    **(
                        {
                            "cases": list(replay.cases),
                            "coverage_gap": replay.coverage_gap,
                            "reproduced": f"{replay.reproduced}/{len(replay.runs)}",
                            "replay_file": str(self.files.get(f"replay-{index}", "")),
                        }
                        if replay is not None
                        else {}
                    ),
                }
                for index, (separation, replay) in enumerate(
                    zip(self.separations, self.replays or [None] * len(self.separations)), 1
                )
            ],
        }


def write_model(
    folder: RunFolder,
    name: str,
    model: MealyModel,
    title: str,
    differing: frozenset[tuple[str, str]] = frozenset(),
) -> dict[str, Path]:
    """model.json, model.dot and (with Graphviz) model.svg of ``name``."""
    folder.learn_dir(name).mkdir(parents=True, exist_ok=True)
    files = {"json": folder.learned_model(name, ".json"), "dot": folder.learned_model(name, ".dot")}
    files["json"].write_text(json.dumps(model.to_json(), indent=1) + "\n", encoding="utf-8")
    files["dot"].write_text(model.to_dot(title, differing), encoding="utf-8")
    svg = folder.learned_model(name, ".svg")
    if write_svg(files["dot"], svg):
        files["svg"] = svg
    return files


def learn_target(
    target: Target,
    reference: Target | None,
    alphabet: ProtocolAlphabet,
    run_dir: Path,
    run_id: str,
    options: LearnOptions = LearnOptions(),
    *,
    reference_model: MealyModel | None = None,
    replays: int = DEFAULT_REPLAYS,
    say: Callable[[str], None] = lambda line: None,
) -> LearnRun:
    """Learn ``target`` (and ``reference``, unless its model is given or
    it is the target itself), diff, replay, write. Raises
    NondeterministicTarget, TargetError, TargetNotStarted."""
    folder = RunFolder(run_dir)
    reference_result = None
    if reference_model is None and reference is not None and reference.name != target.name:
        say(f"learning the reference {reference.name} ...")
        with running_target(reference, run_dir, run_id) as runtime:
            reference_result = learn(runtime, alphabet, options)
        reference_model = reference_result.model
        write_model(
            folder,
            reference.name,
            reference_model,
            _title(reference.name, alphabet, reference_result),
        )
    say(f"learning {target.name} ...")
    with running_target(target, run_dir, run_id) as runtime:
        result = learn(runtime, alphabet, options)
        if reference_model is None:  # the target is the reference
            reference_model = result.model
        found = separations(result.model, reference_model)
        done = [
            replay_separation(runtime, alphabet, separation, replays, result.read_window)
            for separation in (found if replays else [])
        ]
    run = LearnRun(
        result,
        reference_model,
        reference.name if reference is not None else target.name,
        reference_result,
        found,
        done,
    )
    differing = frozenset(separation.target_transition for separation in found)
    run.files.update(
        write_model(
            folder, target.name, result.model, _title(target.name, alphabet, result), differing
        )
    )
    for index, replay in enumerate(done, 1):
        path = folder.learn_replay(target.name, index, replay.label())
        replay.write(path)
        run.files[f"replay-{index}"] = path
    folder.learn_summary(target.name).write_text(
        json.dumps(run.summary(), indent=1) + "\n", encoding="utf-8"
    )
    run.files["summary"] = folder.learn_summary(target.name)
    _allure_result(folder, target, alphabet, run)
    return run


def _allure_result(
    folder: RunFolder, target: Target, alphabet: ProtocolAlphabet, run: LearnRun
) -> None:
    """The learned model in the run's Allure report: the picture (the
    transitions that differ from the reference in red), the model and the
    summary; passed when the model equals the reference's, failed with the
    separating sequences otherwise."""
    figures = run.result.figures()
    if run.separations:
        lines = [f"{len(run.separations)} separating sequence(s) against {run.reference_name}:"]
        for index, separation in enumerate(run.separations, 1):
            replay = run.replays[index - 1] if run.replays else None
            named = (
                ""
                if replay is None
                else f" [{', '.join(replay.cases) if replay.cases else 'COVERAGE GAP'}]"
            )
            lines.append(
                f"{index}. {' · '.join(separation.word)}: target "
                f"{' · '.join(separation.target_outputs)}, reference "
                f"{' · '.join(separation.reference_outputs)}{named}"
            )
        message = "\n".join(lines)
    else:
        message = f"the model equals {run.reference_name}'s"
    attachments = [
        Attachment(
            "model (JSON)", run.files["json"].read_text("utf-8"), "application/json", "json"
        ),
        Attachment("model (DOT)", run.files["dot"].read_text("utf-8"), "text/plain", "txt"),
        Attachment("summary", run.files["summary"].read_text("utf-8"), "application/json", "json"),
    ]
    if "svg" in run.files:
        attachments.insert(
            0, Attachment("model", run.files["svg"].read_bytes(), "image/svg+xml", "svg")
        )
    write_allure_result(
        folder,
        target=target.name,
        protocol=alphabet.protocol,
        kind="learn",
        name=f"learned model ({alphabet.role} role)",
        status="failed" if run.separations else "passed",
        message=message,
        seconds=float(figures["seconds"]),
        attachments=tuple(attachments),
    )


def _title(name: str, alphabet: ProtocolAlphabet, result: LearnResult) -> str:
    return (
        f"{name} ({alphabet.protocol} {alphabet.role}): {len(result.model.states)} states, "
        f"{len(result.model.transitions)} transitions"
    )
