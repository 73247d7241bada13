"""Conformance and interoperability test harness."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("conformance-harness")
except PackageNotFoundError:  # running from a checkout that is not installed
    __version__ = "0.1.0+checkout"
