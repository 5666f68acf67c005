"""toolkernel: run the tool calls of LLM agents concurrently, without races."""

from ._errors import CapacityError as CapacityError
from ._errors import DeadlockError as DeadlockError
from ._errors import DependencyCycleError as DependencyCycleError
from ._errors import ForeignLeaseError as ForeignLeaseError
from ._errors import IllegalTransitionError as IllegalTransitionError
from ._errors import InvalidArgumentsError as InvalidArgumentsError
from ._errors import InvalidCallError as InvalidCallError
from ._errors import InvalidClaimError as InvalidClaimError
from ._errors import KernelClosedError as KernelClosedError
from ._errors import LeaseReleaseError as LeaseReleaseError
from ._errors import NestingDepthError as NestingDepthError
from ._errors import PathEscapeError as PathEscapeError
from ._errors import ToolError as ToolError
from ._errors import ToolkernelError as ToolkernelError
from ._errors import UndeclaredAccessError as UndeclaredAccessError
from ._errors import UnknownPoolError as UnknownPoolError
from ._errors import UnknownToolError as UnknownToolError
from .locks import EVERYTHING as EVERYTHING
from .locks import Claim as Claim
from .locks import Lease as Lease
from .locks import LeaseTable as LeaseTable
from .locks import LockManager as LockManager
from .locks import Mode as Mode
from .locks import device as device
from .locks import exclusive as exclusive
from .locks import path as path
from .locks import pool as pool
from .locks import reads as reads
from .locks import shared as shared
from .locks import units as units
from .locks import writes as writes

__version__ = "0.1.0.dev0"
