"""Properties of the prediction over generated commands and projects.

- Running a package.json script covers (exclusively) every write the script's own text claims.
- Effects are known for a list of commands exactly when they are known for each of them.
- Each environment mix is given builds into its own ``_build/ENV``, always claimed.
"""

from __future__ import annotations

import json
import pathlib
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

import toolkernel as tk
from toolkernel.locks import Mode, Path
from toolkernel.shell import analyse
from toolkernel.tools import shell_claims

COMMANDS = [
    "ls src",
    "cat a.txt > b.txt",
    "mkdir -p build/out && cp a.txt build/out/",
    "echo hi >> log.txt",
    "sed -i s/a/b/ src/x.py",
    "pytest -q tests",
    "ruff check --fix src",
    "ruff format src",
    "eslint src",
    "prettier --write docs",
    "tsc --noEmit",
    "git status",
    "git diff",
    "cargo build",
    "go test ./...",
    "rm -rf dist",
    "touch out/stamp",
    "mix test",
    "make",
]
BARRIER = [tk.exclusive(tk.path())]


def covered(claim: tk.Claim, claims: list[tk.Claim]) -> bool:
    resource = claim.resource
    assert isinstance(resource, Path)
    return any(
        other.mode is Mode.EXCLUSIVE
        and isinstance(other.resource, Path)
        and resource.parts[: len(other.resource.parts)] == other.resource.parts
        for other in claims
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=3))
def test_a_package_script_covers_what_its_text_writes(steps: list[str]) -> None:
    script = " && ".join(steps)
    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        (root / "package.json").write_text(json.dumps({"scripts": {"job": script}}))
        running = shell_claims("npm run job", root=root)
        if running == BARRIER:
            return
        for claim in shell_claims(script):
            if claim.mode is Mode.EXCLUSIVE:
                assert covered(claim, running), (script, claim, running)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=4))
def test_effects_of_a_list_are_known_when_each_commands_are(steps: list[str]) -> None:
    together = analyse(" && ".join(steps))
    if together.barrier is not None:
        assert not together.effects_known
        return
    assert together.effects_known == all(analyse(step).effects_known for step in steps)


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"[a-z][a-z0-9_]{0,9}", fullmatch=True))
def test_each_mix_environment_claims_its_own_build(env: str) -> None:
    claims = shell_claims(f"MIX_ENV={env} mix compile")
    assert tk.exclusive(tk.path(f"_build/{env}")) in claims
