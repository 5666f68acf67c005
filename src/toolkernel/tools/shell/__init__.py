"""Knowing what a shell command touches: a tree-sitter-bash parse and a table of rules.

``shell_claims(command, rules=None)`` gives the claims the Bash tool declares for a command;
``ShellRules`` is the rule table (built in, extended per project); ``analyse`` says what a
command reads, writes and runs, or why it is not understood.
"""

from ._analysis import Access as Access
from ._analysis import Analysis as Analysis
from ._analysis import analyse as analyse
from ._claims import shell_claims as shell_claims
from ._rules import Rule as Rule
from ._rules import ShellRules as ShellRules
