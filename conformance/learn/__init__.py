"""``conformance learn``: active automata learning of a target's state machine
(issue 32), shared by every protocol.

* alphabet.py: what a protocol gives (its abstract inputs, how one
  connection turns them into bytes and what comes back into words);
  the protocols' own alphabets live beside their suites,
  ``conformance/suites/<protocol>/learn_alphabet.py``;
* mapper.py: the system under learning for AALpy: one query = one new
  connection, a read window after every input, a query cache, repetition
  where answers disagree (reported, never guessed);
* learner.py: KV with a bounded state-prefix equivalence oracle, and the
  target's runtime (started as certify starts it);
* model.py: the learned Mealy machine as data (JSON), DOT and SVG;
* diff.py: the separating input sequences against the reference's model;
* replay.py: each separating sequence replayed concretely, as a file;
* session.py: one run of the command (reference, target, diff, replays,
  the files in the run folder);
* defaults.py: the bounds, importable without AALpy;
* cli.py: the command (AALpy is imported only when it runs).
"""
