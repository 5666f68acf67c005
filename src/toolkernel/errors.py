"""Every exception toolkernel raises, and the warning it gives, in one place: the tree is drawn
in ``_errors``.

The top level (``toolkernel``) keeps the bases and the errors a caller catches most; this module
has them all, the rarer ones (a lease released twice, a pool never sized, ...) included.
"""

from ._errors import ApprovalRequiredError as ApprovalRequiredError
from ._errors import ApprovalTimeoutError as ApprovalTimeoutError
from ._errors import BarrierToolWarning as BarrierToolWarning
from ._errors import CallCancelledError as CallCancelledError
from ._errors import CallEndedError as CallEndedError
from ._errors import CallFailedError as CallFailedError
from ._errors import CallTimeoutError as CallTimeoutError
from ._errors import CapacityError as CapacityError
from ._errors import DeadlockError as DeadlockError
from ._errors import DependencyCycleError as DependencyCycleError
from ._errors import DependencyFailedError as DependencyFailedError
from ._errors import FencedOutError as FencedOutError
from ._errors import ForeignLeaseError as ForeignLeaseError
from ._errors import HoldMore as HoldMore
from ._errors import HookError as HookError
from ._errors import IllegalTransitionError as IllegalTransitionError
from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import InvalidBatchError as InvalidBatchError
from ._errors import InvalidCallError as InvalidCallError
from ._errors import InvalidClaimError as InvalidClaimError
from ._errors import KernelClosedError as KernelClosedError
from ._errors import KernelNotOpenError as KernelNotOpenError
from ._errors import LeaseReleaseError as LeaseReleaseError
from ._errors import LeaseServiceError as LeaseServiceError
from ._errors import LeaseWaitTimeoutError as LeaseWaitTimeoutError
from ._errors import MCPServerGoneError as MCPServerGoneError
from ._errors import MCPToolError as MCPToolError
from ._errors import ModelError as ModelError
from ._errors import NestingDepthError as NestingDepthError
from ._errors import NoWorkspaceError as NoWorkspaceError
from ._errors import PathChangedError as PathChangedError
from ._errors import PathEscapeError as PathEscapeError
from ._errors import PermissionDeniedError as PermissionDeniedError
from ._errors import RunTimeoutError as RunTimeoutError
from ._errors import SchemaError as SchemaError
from ._errors import ShellRulesError as ShellRulesError
from ._errors import StaleViewError as StaleViewError
from ._errors import ToolDeclarationError as ToolDeclarationError
from ._errors import ToolError as ToolError
from ._errors import ToolkernelError as ToolkernelError
from ._errors import UndeclaredAccessError as UndeclaredAccessError
from ._errors import UnknownPoolError as UnknownPoolError
from ._errors import UnknownToolError as UnknownToolError
from ._errors import UsageError as UsageError
from ._errors import WrongLoopError as WrongLoopError
