"""The agent side: a minimal loop that drives a model through the kernel, and models to drive.

- :func:`run_agent` (model -> calls -> kernel -> results -> model) with a step limit, retries
  with backoff (:class:`Retry`), a stop reason, and events for every step.
- Models: :class:`ScriptedModel` (replies from a script of :class:`Turn`; for tests and the
  demo) and :class:`OpenAICompatibleModel` (any Chat
  Completions server: OpenAI, Ollama, vLLM; needs ``toolkernel[agent]``).
- Streamed answers (``run_agent(..., stream=True)`` with a :class:`StreamingModel`): each call
  starts the moment its block is complete in the answer (Chat Completions, Responses and
  Anthropic streams), conflicting calls still in the order the model emitted them.
- :data:`CALLS_PROMPT`: the system-prompt paragraph that tells a model to emit independent calls
  together and dependent ones in order (or with ``depends_on``).
"""

import warnings as _warnings

from .._errors import ModelError as ModelError
from ._events import AgentEvent as AgentEvent
from ._events import ModelReplied as ModelReplied
from ._events import ModelRetrying as ModelRetrying
from ._events import StepStarted as StepStarted
from ._events import TodosUpdated as TodosUpdated
from ._http import OpenAICompatibleModel as OpenAICompatibleModel
from ._loop import AgentOutcome as AgentOutcome
from ._loop import Step as Step
from ._loop import StopReason as StopReason
from ._loop import run_agent as run_agent
from ._model import Model as Model
from ._model import ScriptedModel as ScriptedModel
from ._prompt import CALLS_PROMPT as CALLS_PROMPT
from ._retry import Retry as Retry
from ._streaming import StreamingModel as StreamingModel
from ._turns import Turn as Turn

# Names that left this module, each with its new home: kept for one release, with a warning.
_MOVED = {"DEMO_TURNS": "the command line's demo (python -m toolkernel demo)"}


def __getattr__(name: str) -> object:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    message = f"toolkernel.agent.{name} is deprecated: it is {_MOVED[name]}'s data"
    _warnings.warn(message, DeprecationWarning, stacklevel=2)
    from ._demo_turns import DEMO_TURNS

    return DEMO_TURNS
