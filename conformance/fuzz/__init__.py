"""``conformance fuzz`` and ``conformance replay``: stateful Hypothesis runs
against live targets, judged by the suites' rules against the reference
cores, failures shrunk into replay files (docs/fuzz.md).

- strategies.py: hostile bytes, shared with the project's property tests;
- machine.py: what every machine shares (actions, failures, the session);
- stomp_server.py, ripplehost_server.py: the machines, per protocol and role;
- engine.py: budgets, rounds, seeds, restarts, replay files, result records;
- cli.py: the two subcommands.
"""
