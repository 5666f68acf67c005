"""The read-only command list of the coarse schemes the replay compares against: what is on
it must be safe under a shared lease on the workspace."""

import pytest

from toolkernel._replay import is_read_only_command


@pytest.mark.parametrize(
    "command",
    [
        "ls",
        "ls -la src",
        "cat x",
        "grep -r foo .",
        "find . -name '*.py'",
        "cat a | wc -l",
        "head -n 5 a.txt | grep foo | wc -l",
        "env",
        "rg foo",
        "rg -n -i foo src",
        "tree -L 2",
        "date +%s",
        "date -u",
        "file -b x",
    ],
)
def test_read_only_commands_are_recognised(command: str) -> None:
    assert is_read_only_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "rm x",
        "rm -rf .",
        "ls > out.txt",
        "cat a >> b",
        "cat < a",
        "ls; rm x",
        "ls && rm x",
        "ls || rm x",
        "ls & rm x",
        "echo $(rm x)",
        "echo `rm x`",
        "echo $HOME",
        "find . -delete",
        "find . -name '*.py' -exec rm {} +",
        "git commit -m x",
        "git push",
        "git",
        "git diff --output=patch",
        "sed -i s/a/b/ x",
        "VAR=x ls",
        "env rm -rf .",
        "tree -o out.txt",
        "tree -ao out.txt",
        "tree -R -H . ",
        "rg --pre ./script foo",
        "rg --pre=./script foo",
        "rg -z foo",
        "rg --search-zip foo",
        "rg --hostname-bin ./script foo",
        "file -C -m magic",
        "file -z x.gz",
        "date -s 2000-01-01",
        "date --set=2000-01-01",
        "date 0101000000",
        "git status",
        "git log --oneline -5",
        "git diff",
        "git show HEAD",
        "cat a | tee b",
        "ls | sh",
        "python -c 'print(1)'",
        "(ls)",
        "ls\nrm x",
        "",
        "   ",
        "cat 'unclosed",
    ],
)
def test_risky_commands_are_not_read_only(command: str) -> None:
    assert not is_read_only_command(command)
