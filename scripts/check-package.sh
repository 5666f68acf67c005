#!/usr/bin/env bash
# The package as a user gets it: build the sdist and the wheel (from the sdist, as `python -m
# build` does) out of a copy of the tree, check their metadata with twine, install the wheel
# into a fresh venv outside the tree, and from an unrelated directory run what the README and
# the tutorial tell a user to run: the README's example with no extra (trio not installed), a
# missing extra's message (it must name this wheel), then with the demo's extras ([trio],
# [shell], and [cli] by its alias [console]) the tutorial's trio program and the demo. Everything happens in a temporary
# directory; the tree is left as it was. Run from the project's root with its .venv set up
# (.ci/run does both). About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
dev=("$root/.venv/bin/python")
PYTHON="${PYTHON:-python3}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/toolkernel-package.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
if [ -t 2 ]; then pip_output=(); else pip_output=(--quiet); fi
step() { echo "== package: $*"; }

step "building the sdist and the wheel from a copy of the tree"
mkdir "$tmp/src" "$tmp/dist" "$tmp/work"
# What a clean clone has (tracked files, and new ones not ignored), as they are now.
git ls-files -z --cached --others --exclude-standard \
    | (cd "$root" && xargs -0 cp --parents --target-directory="$tmp/src" 2> /dev/null || true)
"${dev[@]}" -m build "${pip_output[@]}" --outdir "$tmp/dist" "$tmp/src" > "$tmp/build.log" 2>&1 \
    || { cat "$tmp/build.log" >&2; exit 1; }
sdist=("$tmp"/dist/toolkernel-*.tar.gz)
wheel=("$tmp"/dist/toolkernel-*-py3-none-any.whl)
[ -f "${sdist[0]}" ] && [ -f "${wheel[0]}" ] || { ls -l "$tmp/dist" >&2; exit 1; }

step "twine check --strict"
"${dev[@]}" -m twine check --strict "$tmp"/dist/*

step "the licence and metadata in both"
"${dev[@]}" - "${wheel[0]}" "${sdist[0]}" << 'EOF'
import sys, tarfile, zipfile
from email.parser import Parser

wheel, sdist = zipfile.ZipFile(sys.argv[1]), tarfile.open(sys.argv[2])
names = wheel.namelist()
info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
problems = []
if f"{info}/licenses/LICENSE" not in names:
    problems.append("the wheel has no LICENSE")
if not any(n.endswith("/LICENSE") and n.count("/") == 1 for n in sdist.getnames()):
    problems.append("the sdist has no LICENSE at its top")
if metadata["License-Expression"] != "MIT" or metadata.get_all("License-File") != ["LICENSE"]:
    problems.append(f"license metadata: {metadata['License-Expression']!r}, "
                    f"{metadata.get_all('License-File')!r}")
requires = metadata.get_all("Requires-Dist") or []
if any(r.startswith("trio") and "extra ==" not in r for r in requires):
    problems.append("trio is a requirement of the core, not of the [trio] extra")
for name in ("toolkernel/py.typed", "toolkernel/shell/rules.toml",
             "toolkernel/cli/sample-project/README.md"):
    if name not in names:
        problems.append(f"the wheel has no {name}")
if problems:
    sys.exit("\n".join(problems))
print(f"{len(names)} files in the wheel, {len(sdist.getnames())} in the sdist;",
      f"License-Expression: MIT, {len(metadata.get_all('Classifier'))} classifiers")
EOF

step "installing the wheel, no extra, into a fresh venv ($("$PYTHON" --version))"
"$PYTHON" -m venv "$tmp/venv"
user="$tmp/venv/bin/python"
"$user" -m pip install "${pip_output[@]}" --disable-pip-version-check "${wheel[0]}"
if "$user" -c 'import trio' 2> /dev/null; then
    echo "trio came with the core install; it is the [trio] extra's" >&2
    exit 1
fi

# Examples of the README and the docs, extracted and compared as tests/test_readme.py does:
# the first python block under a heading of a page (its text, after "## " or "### ", may be
# only the start of the heading), run by the user's interpreter in an empty directory.
quick_start() {
    local page="$1" heading="$2"
    rm -rf "$tmp/work" && mkdir "$tmp/work"
    "${dev[@]}" - "$page" "$heading" "$tmp/block.py" "$tmp/expected.txt" << 'EOF'
import re
import sys
from pathlib import Path

sys.path.insert(0, ".")
from tests.test_readme import readme_blocks

page, heading, code, expected = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
text = Path(page).read_text()
start = re.search(rf"^##+ {re.escape(heading)}", text, re.MULTILINE).start()
[block, *_] = [b for b in readme_blocks(text) if b.line > text.count("\n", 0, start) + 1]
code.write_text(block.code)
expected.write_text(block.expected or "")
EOF
    (cd "$tmp/work" && "$user" "$tmp/block.py" > "$tmp/printed.txt")
    "${dev[@]}" - "$heading" "$tmp/expected.txt" "$tmp/printed.txt" << 'EOF'
import sys
from pathlib import Path

sys.path.insert(0, ".")
from tests.test_readme import matches

heading, expected, printed = sys.argv[1], *(Path(p).read_text() for p in sys.argv[2:])
if not matches(expected, printed):
    sys.exit(f"the example of {heading!r} printed:\n{printed}\nwhere its page shows:\n{expected}")
EOF
}

step "the README's example (asyncio), from $tmp/work, without trio"
quick_start README.md "An example"

step "a missing extra's message names this wheel"
set +e
message="$(cd "$tmp/work" && "$user" -m toolkernel console --root . 2>&1 > /dev/null)"
status=$?
set -e
expected="pip install '${wheel[0]}[cli]'"
if [ "$status" != 2 ] || [[ "$message" != *": $expected" ]]; then
    echo "the console without [cli] said (status $status): $message" >&2
    echo "where it should end with: $expected" >&2
    exit 1
fi

step "installing the demo's extras from the wheel: [trio], [shell], [console] (an alias of [cli])"
"$user" -m pip install "${pip_output[@]}" --disable-pip-version-check "${wheel[0]}[trio,shell,console]"
"$user" -c 'import trio, tree_sitter_bash, rich, prompt_toolkit'

step "the tutorial's first trio program"
quick_start docs/tutorial.md "On trio"

step "the demo (python -m toolkernel demo), from $tmp/work"
(cd "$tmp/work" && timeout 300 "$user" -m toolkernel demo --color never > "$tmp/demo.txt")
grep -q "final trees identical: True" "$tmp/demo.txt" \
    || { tail -20 "$tmp/demo.txt" >&2; echo "the demo did not say its trees were identical" >&2; exit 1; }
step "replay of the sample trace shipped in the wheel (python -m toolkernel replay), from $tmp/work"
(cd "$tmp/work" && timeout 300 "$user" -m toolkernel replay --svg "$tmp/replay.svg" > "$tmp/replay.txt")
grep -q "under every strategy" "$tmp/replay.txt" \
    || { tail -20 "$tmp/replay.txt" >&2; echo "replay did not replay the sample trace" >&2; exit 1; }
echo "package: ok"
