#!/usr/bin/env bash
# CI: build the documentation site strictly (a broken link, a page left out of the navigation or
# a reference that does not resolve is an error), into a temporary directory so the clone stays
# clean. Its examples run in the tests (tests/test_readme.py), not here.
set -euo pipefail
cd "$(dirname "$0")/.."
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
