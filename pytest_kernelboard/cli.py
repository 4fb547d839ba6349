"""The `kernelboard` command: everything that is not a test run.

Each command group lives in its own module, which exposes `register(subparsers)`;
a registered parser sets `func(args) -> int` as its default.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys

from . import __version__

DISTRIBUTION = "pytest-kernelboard"  # the name pyproject.toml installs the package under

# Modules that contribute subcommands, in the order `--help` lists them.
COMMAND_MODULES = [
    "pytest_kernelboard.spec.scaffold",  # kernelboard new
    "pytest_kernelboard.importers",  # kernelboard import gpumode|...
    "pytest_kernelboard.pr.cli",  # kernelboard pr
    "pytest_kernelboard.results.store",  # kernelboard results
    "pytest_kernelboard.pr.runner_labels",  # kernelboard runner-labels
    "pytest_kernelboard.batch.cli",  # kernelboard judge
    "site_generator.cli",  # kernelboard site
    "pytest_kernelboard.service.cli",  # kernelboard serve
]


def version() -> str:
    """The installed package's version (its metadata); a source tree not installed says its own."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelboard", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version()}", help="print the version"
    )
    # Not required: `kernelboard` alone prints this help (see main).
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a first look: show what there is, not a usage error
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
