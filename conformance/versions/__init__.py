"""Every release of an implementation as a target of its own
(docs/versions.md): the registries' release lists and their order
(registry.py), the share of a list one machine certifies (shard.py), and
``conformance versions list|certify`` (cli.py). The versioned target itself
(``NAME@VERSION``) is conformance/core/versioned_targets.py's."""
