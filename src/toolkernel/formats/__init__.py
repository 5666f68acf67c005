"""Wire formats: tools out, the model's calls in, results back, for OpenAI and Anthropic.

- :mod:`toolkernel.formats.openai`: Chat Completions (``chat_tools``, ``calls_from_chat``,
  ``chat_tool_messages``) and Responses (``responses_tools``, ``calls_from_responses``,
  ``responses_outputs``), with OpenAI's strict mode (``strict=True``).
- :mod:`toolkernel.formats.anthropic`: Messages (``tools``, ``calls_from_message``,
  ``tool_results``).

Each accepts the official SDK's objects and plain dicts alike, and returns plain dicts. Tool
names a format forbids are renamed reversibly (:func:`wire_names`); malformed model output
becomes ERROR results, never exceptions.

Dependent calls: a model can't know the ids of the calls it is writing, so within one message
it names them by position. A call whose arguments hold ``"depends_on": [1]`` runs after the
first call of the same message (``after=`` in the kernel) and is skipped if that call failed;
``${1}`` inside a string argument stands for that call's output as text, and a whole string
``"$1"`` for the output itself. Export the tools with ``dependencies=True`` to offer
``depends_on`` in every schema.
"""

from . import anthropic as anthropic
from . import openai as openai
from ._names import wire_names as wire_names
from ._schema import DEPENDS_ON as DEPENDS_ON
