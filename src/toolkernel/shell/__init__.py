"""Knowing what a shell command touches: a tree-sitter-bash parse and a table of rules.

``shell_claims(command, rules=None, *, root=None)`` gives the claims the Bash tool declares for
a command; ``ShellRules`` is the rule table (built in, extended per project:
``project_rules(root)`` adds the workspace's own ``.toolkernel/shell.toml``); ``analyse`` says
what a command reads, writes and runs, whether its effects are known whole
(``Analysis.effects_known``), what it changes beyond the sandbox (``Analysis.effects_beyond``;
``Analysis.confined`` says whether it may run again), or why it is not understood.
``claim_sources`` names the rules each claim comes from, ``describe_miss`` tells a user which
rule to add for a write the claims missed, and ``command_environment`` is what a command must
run with for its claims to hold.
"""

from ._analysis import Access as Access
from ._analysis import Analysis as Analysis
from ._claims import claim_sources as claim_sources
from ._claims import describe_miss as describe_miss
from ._claims import shell_claims as shell_claims
from ._environment import command_environment as command_environment
from ._project import analyse as analyse
from ._project import project_rules as project_rules
from ._rules import Rule as Rule
from ._rules import ShellRules as ShellRules
