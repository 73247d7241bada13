"""The node's STOMP servers manifest (Swaptacular STOMP profile, "STOMP
Servers Manifest Files").

"Every Swaptacular node MUST publicly provide a STOMP servers manifest
file, which describes the STOMP servers that the node runs." Where a node
publishes it is its own business (the profile names no URL), so the target
gives the harness the file: params ``manifest_file`` (a launched node may
write it and name it in its ready output). Without one the case is not
applicable. The file is read with a bound and validated by the reference
parser (reference_impl/stomp/manifest.py): TOML, ``servers`` a non-empty
list of ``hostname:port``, ``host`` and ``destination`` strings, the
optional keys of the right types; a failure names the key at fault.

What the case does not judge: whether the listed servers are the address
the harness certifies. A node may publish DNS names, or ports a NAT maps
onto the one the harness reaches; the text asks for a description of the
servers, not for the harness's view of them.
"""

from __future__ import annotations

from conformance.core.requirements import not_applicable, requirement
from conformance.core.targets import TargetError
from reference_impl.stomp.manifest import ManifestError, load_manifest

from .peer import manifest_path

CITE = (
    'Swaptacular STOMP profile, STOMP Servers Manifest Files ("Every Swaptacular node MUST publicly provide a '
    'STOMP servers manifest file, which describes the STOMP servers that the node runs"; the keys servers, host, '
    "login, passcode, destination, accepted-content-types)"
)
EXAMPLE_NODE_ID = "12345678"
"""The node id of the profile's own example, to check that substitution
works on the manifest's values."""


@requirement("stomp.manifest.server.provides-valid-manifest", "MUST", CITE)
async def test_provides_valid_manifest(target):
    path = manifest_path(target)
    if path is None:
        not_applicable(
            f"target {target.target.name} gives no params.manifest_file (a copy of the stomp.toml the "
            "node publishes)"
        )
    try:
        manifest = load_manifest(path)
    except ManifestError as exc:
        raise AssertionError(
            f"the node's manifest {path} is not a valid STOMP servers manifest: {exc}"
        ) from None
    except OSError as exc:
        raise TargetError(f"params.manifest_file {path}: {exc.strerror or exc}") from None
    substituted = manifest.substituted(EXAMPLE_NODE_ID)
    assert substituted.servers, f"the manifest {path} lists no server"
