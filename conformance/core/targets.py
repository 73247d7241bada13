"""Targets: the nodes under test, described declaratively in TOML
(docs/targets.md). The names other modules use, from where they live:

* target_errors.py: TargetError, TargetNotStarted (a leaf module: the
  declaration, the runtime and the readiness rule all raise them);
* target_commands.py: how a command is split and its ``{placeholder}``
  fields, the types of the numeric ones, client_timeout;
* target_spec.py: the declaration: Target, the TOML files read and checked
  (load_targets, parse_target, unknown_keys_problem, definition_problems),
  the params and credentials each protocol knows; container_spec.py holds
  the ``[container]`` table;
* target_runtime.py: a target during a run: TargetRuntime, the processes
  it starts (ProcessHandle), runtime_problems; containers.py runs the
  container targets, readiness.py says when a started server is ready;
* work_dirs.py: the private work dir of each target and run.

Importing this module imports the runtime; a module that needs only the
declaration or the errors imports those modules.
"""

from __future__ import annotations

from .target_commands import PLACEHOLDER_TYPES, client_timeout, command_argv, placeholder_text
from .target_errors import TargetError, TargetNotStarted
from .target_runtime import (
    ADDRESS_IN_USE_ATTEMPTS,
    MAX_ADAPTER_OUTPUT,
    ProcessHandle,
    TargetRuntime,
    free_port,
    runtime_problems,
)
from .target_spec import (
    GENERATORS,
    KNOWN_CREDENTIALS,
    KNOWN_PARAMS,
    KNOWN_PROTOCOLS,
    REPO_ROOT,
    RUN_PKI_FILES,
    CredentialRef,
    LaunchSpec,
    Target,
    builtin_targets,
    definition_problems,
    did_you_mean,
    load_targets,
    load_targets_file,
    parse_target,
    unknown_keys_problem,
)
from .work_dirs import (
    WORK_DIR_OWNER_LOCK,
    WORK_DIR_PREFIX,
    make_work_dir,
    remove_abandoned_work_dirs,
    remove_work_dir,
)

__all__ = [
    "ADDRESS_IN_USE_ATTEMPTS",
    "GENERATORS",
    "KNOWN_CREDENTIALS",
    "KNOWN_PARAMS",
    "KNOWN_PROTOCOLS",
    "MAX_ADAPTER_OUTPUT",
    "PLACEHOLDER_TYPES",
    "REPO_ROOT",
    "RUN_PKI_FILES",
    "WORK_DIR_OWNER_LOCK",
    "WORK_DIR_PREFIX",
    "CredentialRef",
    "LaunchSpec",
    "ProcessHandle",
    "Target",
    "TargetError",
    "TargetNotStarted",
    "TargetRuntime",
    "builtin_targets",
    "client_timeout",
    "command_argv",
    "definition_problems",
    "did_you_mean",
    "free_port",
    "load_targets",
    "load_targets_file",
    "make_work_dir",
    "parse_target",
    "placeholder_text",
    "remove_abandoned_work_dirs",
    "remove_work_dir",
    "runtime_problems",
    "unknown_keys_problem",
]
