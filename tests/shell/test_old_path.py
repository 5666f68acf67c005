"""``toolkernel.tools.shell``, the shell analysis's old path, for one release: a warning and the
same package."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str, *options: str) -> subprocess.CompletedProcess[str]:
    # A fresh interpreter: in this one the old path may be imported already, and warns no more.
    return subprocess.run(
        [sys.executable, *options, "-c", code], capture_output=True, text=True, timeout=60
    )


def test_the_old_path_warns_where_it_is_imported() -> None:
    ran = _run("import toolkernel.tools.shell", "-W", "default")
    assert ran.returncode == 0, ran.stderr
    assert "<string>:1: DeprecationWarning: toolkernel.tools.shell is deprecated" in ran.stderr
    assert "import toolkernel.shell" in ran.stderr


def test_the_old_path_is_the_new_package() -> None:
    code = """
import toolkernel.shell as new, toolkernel.shell._rules as rules
import toolkernel.tools.shell as old
from toolkernel.tools.shell import analyse, ShellRules
from toolkernel.tools.shell._confine import Launch
import toolkernel.tools.shell._claims as claims
assert old is new and analyse is new.analyse and ShellRules is rules.ShellRules
assert Launch.__module__ == "toolkernel.shell._confine" and claims is new._claims
print(len(new.shell_claims("cat a.txt")))
"""
    ran = _run(code, "-W", "ignore::DeprecationWarning")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "1\n"
