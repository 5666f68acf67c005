"""Tools and the world they act on: the workspace that names files, and checked file access."""

from ._builtin import builtin_tools as builtin_tools
from ._declare import FunctionTool as FunctionTool
from ._declare import Tool as Tool
from ._declare import tool as tool
from ._fs import Entry as Entry
from ._fs import FileAccess as FileAccess
from ._fs import FileAccessed as FileAccessed
from ._views import FileVersion as FileVersion
from ._views import FileView as FileView
from ._views import StaleRule as StaleRule
from ._workspace import Workspace as Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..shell import ShellRules as ShellRules
    from ..shell import shell_claims as shell_claims


def __getattr__(name: str) -> object:
    # The shell analysis (the rule table, the parser, the project readers) and the sandbox
    # behind it load on first use, not with every ``import toolkernel``.
    if name in ("ShellRules", "shell_claims"):
        from .. import shell

        return getattr(shell, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
