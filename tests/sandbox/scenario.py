"""One run of a command on an overlay of a workspace, with something else changing the
workspace meanwhile: what the run changed, what was changed underneath it, and (if nothing
was) the workspace after its commit.

Imported by the tests, and run as a script so that a test can run it as an unprivileged user
(the sandbox then makes a user namespace)::

    python scenario.py ROOT COMMAND [--before-read SHELL] [--before-check SHELL]

prints one JSON object: ``changes`` (path, kind, replaces, metadata_only, copied_up), and
``underneath`` (the paths changed underneath) and ``output`` (what the command printed), and
commits the run when nothing was changed underneath.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from toolkernel.sandbox import LAUNCHER, Overlay


def shell(root: str, snippet: str | None) -> None:
    """Run ``snippet`` on the workspace itself: another writer, outside the overlay."""
    if snippet:
        subprocess.run(["/bin/sh", "-c", snippet], cwd=root, check=True)


def launcher() -> list[str]:
    """The launcher's command line. Its interpreter is this one, unless this process may not
    run it (a test dropped root's privileges to run this, and this interpreter lies in root's
    home): then the system's, since the launcher needs nothing but the standard library."""
    python, *rest = LAUNCHER
    if not os.access(python, os.X_OK):
        python = shutil.which("python3") or python
    return [python, *rest]


def run(root: str, command: str) -> tuple[Overlay, str]:
    """Run ``command`` (``bash -c``) on a fresh overlay of ``root``; the overlay, whose
    changes are the run's (the caller discards it), and what the command printed. Raises if
    the command fails."""
    overlay = Overlay.create(root)
    try:
        argv = [*launcher(), *overlay.launcher_options(), "--", "/bin/bash", "-c", command]
        done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    except BaseException:
        overlay.discard()
        raise
    return overlay, done.stdout


def scenario(
    root: str, command: str, before_read: str | None = None, before_check: str | None = None
) -> dict[str, Any]:
    """Run ``command`` on an overlay of ``root``; run ``before_read`` on the workspace, read
    the change set, run ``before_check``, check it, and commit if nothing was changed
    underneath it."""
    overlay, output = run(root, command)
    try:
        shell(root, before_read)
        changes = overlay.changes()
        shell(root, before_check)
        underneath = overlay.changed_underneath(changes)
        if not underneath:
            overlay.commit(changes)
    finally:
        overlay.discard()
    return {
        "changes": [
            [c.path, c.kind.value, c.replaces, c.metadata_only, c.copied_up] for c in changes
        ],
        "underneath": underneath,
        "output": output,
    }


def run_as(
    user: list[str],
    root: str | os.PathLike[str],
    command: str,
    *,
    before_read: str | None = None,
    before_check: str | None = None,
) -> dict[str, Any]:
    """:func:`scenario`, in this process, or as the user ``user`` (a command prefix) runs it:
    this script in a process of its own."""
    if not user:
        return scenario(os.fspath(root), command, before_read, before_check)
    argv = [*user, sys.executable, __file__, os.fspath(root), command]
    if before_read:
        argv += ["--before-read", before_read]
    if before_check:
        argv += ["--before-check", before_check]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("command")
    parser.add_argument("--before-read")
    parser.add_argument("--before-check")
    options = parser.parse_args()
    found = scenario(options.root, options.command, options.before_read, options.before_check)
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main()
