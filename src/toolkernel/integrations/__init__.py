"""Adapters for agent frameworks: their own tools, each call holding its leases in a kernel.

One module per framework, each behind its extra (``toolkernel[langgraph]``,
``toolkernel[openai-agents]``, ``toolkernel[pydantic-ai]``); importing this package imports none
of them.
"""
