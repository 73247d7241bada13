"""Versioned targets (docs/versions.md): NAME@VERSION parsed and derived
from NAME, the [versions] table checked, and a release the adapter cannot
drive recorded as a target not started, with the adapter's reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.core.package_install import (
    PackageSource,
    failure_reason,
    package_install,
    parse_package_source,
)
from conformance.core.target_errors import cannot_drive, not_started_message
from conformance.core.targets import TargetError, load_targets, load_targets_file
from conformance.core.versioned_targets import (
    derive_target,
    resolve_versioned,
    split_versioned_name,
    versionable,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "name, parts",
    [
        ("stomp-py@8.1.0", ("stomp-py", "8.1.0")),
        ("ilp-plugin-btp@1.4.0", ("ilp-plugin-btp", "1.4.0")),
        ("stompit@1.0.0-rc.1", ("stompit", "1.0.0-rc.1")),
        ("stomp-py@3.1.0b5", ("stomp-py", "3.1.0b5")),
        ("stomp-py", None),
    ],
)
def test_versioned_name_is_split(name, parts):
    assert split_versioned_name(name) == parts


@pytest.mark.parametrize("name", ["@1.0", "stomp-py@", "stomp-py@../../etc", "x@1 2", "x@a/b"])
def test_malformed_versioned_name_is_refused(name):
    with pytest.raises(TargetError):
        split_versioned_name(name)


def test_derived_target_is_the_base_at_the_release(tmp_path):
    targets = load_targets()
    base = targets["stomp-py"]
    derived = derive_target(base, "8.1.0", tmp_path)
    assert derived.name == "stomp-py@8.1.0"
    assert (derived.implementation, derived.version) == ("stomp.py", "8.1.0")
    assert base.version == "9.0.0"  # the base keeps its pinned release
    assert (derived.protocol, derived.roles, derived.capabilities) == (
        base.protocol,
        base.roles,
        base.capabilities,
    )
    assert derived.launch.client == base.launch.client
    package_dir = tmp_path / "stomp.py" / "8.1.0" / "pkg"
    assert derived.launch.env["PYTHONPATH"] == str(package_dir)
    assert derived.package.spec == "stomp.py==8.1.0"
    assert derived.package.command()[-3:] == ["--target", str(package_dir), "stomp.py==8.1.0"]
    npm = derive_target(targets["stompit"], "0.26.0", tmp_path)
    assert npm.launch.env["CONFORMANCE_PACKAGE_DIR"] == str(tmp_path / "stompit" / "0.26.0" / "pkg")
    assert npm.package.command()[:4] == ["npm", "install", "--prefix", str(npm.package.package_dir)]
    assert npm.package.spec == "stompit@0.26.0"


def test_builtin_versioned_targets_are_declared_in_toml():
    with_versions = versionable(load_targets())
    # interop/node/package.json's override, for older ssb-servers too.
    assert with_versions["ssb-server"].versions.overrides == {"ssb-friends": "4.1.4"}
    assert {"stomp-py", "stompman", "stompit", "ilp-plugin-btp", "ssb-server"} <= set(with_versions)
    assert all(t.launch is not None for t in with_versions.values())


def test_resolve_names_the_targets_that_have_releases(tmp_path):
    targets = load_targets()
    resolve_versioned(targets, ["stompit@0.26.0", "reference-ssb", None], tmp_path)
    assert targets["stompit@0.26.0"].version == "0.26.0"
    with pytest.raises(TargetError, match="no releases declared for target 'reference-ssb'"):
        resolve_versioned(targets, ["reference-ssb@0.2.0"], tmp_path)
    with pytest.raises(TargetError, match="unknown target 'nope'.*stomp-py"):
        resolve_versioned(targets, ["nope@1.0"], tmp_path)


@pytest.mark.parametrize(
    "table, problem",
    [
        ({"registry": "cargo", "package": "x", "env": {"P": "{package_dir}"}}, "registry"),
        ({"registry": "npm", "package": "", "env": {"P": "{package_dir}"}}, "package"),
        ({"registry": "npm", "package": "x", "env": {"P": "/fixed"}}, "package_dir"),
        ({"registry": "npm", "package": "x", "env": {}, "pin": "1"}, "unknown field"),
        (
            {
                "registry": "pypi",
                "package": "x",
                "env": {"P": "{package_dir}"},
                "overrides": {"a": "1"},
            },
            "overrides are npm's",
        ),
        (
            {"registry": "npm", "package": "x", "env": {"P": "{package_dir}"}, "overrides": []},
            "table",
        ),
    ],
)
def test_versions_table_is_checked(table, problem):
    with pytest.raises(TargetError, match=problem):
        parse_package_source(table, "t")


def test_installer_failure_reason_is_its_last_error_lines():
    log = (
        "$ pip install\nERROR: Ignored the following yanked versions: 6.1.0\n"
        "ERROR: Could not find a version that satisfies the requirement x==9\n"
        "ERROR: No matching distribution found for x==9\n"
    )
    reason = failure_reason(log, 1)
    assert reason.startswith("the installer exited with code 1: ")
    assert "No matching distribution found for x==9" in reason and "yanked" not in reason
    assert "timed out" in failure_reason("npm ERR! code ETIMEDOUT\n", None)


def test_cannot_drive_line_leads_the_not_started_message():
    output = "stomp.py 3.1.6 from /x\nCANNOT_DRIVE stomp.py 3.1.6: no frame\nerror: ...\n"
    assert cannot_drive(output) == "stomp.py 3.1.6: no frame"
    assert not_started_message("exited with code 8", output).startswith(
        "adapter cannot drive stomp.py 3.1.6: no frame; exited with code 8"
    )
    assert not_started_message("exited with code 1", "plain output") == "exited with code 1"


OLD_STOMP = """
__version__ = (4, 1, 24)

class ConnectionListener:
    def on_connected(self, headers, body): pass
    def on_receipt(self, headers, body): pass

class Connection12:
    def __init__(self, host_and_ports=None, vhost=None, heartbeats=(0, 0), reconnect_attempts_max=3,
                 timeout=None, try_loopback_connect=True): pass
    def set_ssl(self, for_hosts=(), cert_file=None, key_file=None, ca_certs=None, ssl_version=None): pass
    def connect(self, username=None, passcode=None, wait=False): pass
    def send(self, destination, body, content_type=None, headers=None, **keyword_headers): pass
    def disconnect(self, receipt=None): pass
"""


def test_release_the_adapter_cannot_drive_is_not_started(tmp_path):
    """A stomp.py whose listeners take (headers, body), as before stomp.py
    5, put in the cache as if installed: the certification records every
    case as not started with "adapter cannot drive stomp.py 4.1.24: ...",
    never a failed rule (exit 4)."""
    cache = tmp_path / "cache"
    install = package_install(
        PackageSource("pypi", "stomp.py", {"PYTHONPATH": "{package_dir}"}),
        "stomp.py",
        "4.1.24",
        cache,
    )
    (install.package_dir / "stomp").mkdir(parents=True)
    (install.package_dir / "stomp" / "__init__.py").write_text(OLD_STOMP, encoding="utf-8")
    (install.package_dir / "stomp" / "exception.py").write_text(
        "class StompException(Exception): pass\n", encoding="utf-8"
    )
    install.status_path.write_text(json.dumps({"ok": True, "seconds": 0.0}), encoding="utf-8")
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(REPO), CONFORMANCE_VERSIONS_CACHE=str(cache))
    done = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "certify", "--target", "stomp-py@4.1.24",
         "--case", "stomp.frame.client.sends-well-formed-frames", "--run-dir", str(run_dir)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert records and all(r["outcome"] == "error" and r["start_failure"] for r in records)
    assert {(r["implementation"], r["implementation_version"]) for r in records} == {
        ("stomp.py", "4.1.24")
    }
    assert (
        "adapter cannot drive stomp.py 4.1.24: stomp.ConnectionListener.on_receipt has no parameter "
        "frame" in records[0]["message"]
    )


def test_versions_table_in_a_targets_file_makes_its_own_targets_versioned(tmp_path):
    file = tmp_path / "t.toml"
    file.write_text(
        """
[targets.my-client]
implementation = "stomp.py"
version = "9.0.0"
protocol = "stomp"
roles = ["client"]
[targets.my-client.launch]
client = "{python} {repo}/interop/stomp/stomppy_client.py --manifest {manifest_file}"
[targets.my-client.versions]
registry = "pypi"
package = "stomp.py"
env = { PYTHONPATH = "{package_dir}" }
""",
        encoding="utf-8",
    )
    targets = load_targets_file(file)
    resolve_versioned(targets, ["my-client@8.0.0"], tmp_path)
    assert targets["my-client@8.0.0"].package.version == "8.0.0"
