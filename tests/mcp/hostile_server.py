"""An MCP server that breaks the protocol on purpose, for the tests: JSON-RPC over stdio written
by hand (the SDK's server would not misbehave). ``python tests/mcp/hostile_server.py MODE``:

- ``twice``: lists two tools with one name (``lookup``), then a third, ``other``;
- ``empty-name``: lists tools named ``""`` and ``" "`` beside ``lookup``;
- ``malformed``: answers every call with a result whose ``content`` is not a list;
- ``untyped``: lists ``help`` with the input schema ``{}`` (which the MCP SDK refuses: the spec
  says ``type: object``);
- ``no-properties``: lists ``help`` with the input schema ``{"type": "object"}`` (as the Go SDK
  writes a tool without arguments).
- ``catastrophic-pattern``: lists ``lookup`` and ``match``, whose ``name`` argument has the
  pattern ``^(a+)+$`` (a backtracking engine takes exponential time on ``aaa…a!``).

Calls are otherwise answered with the text ``<tool> answered``.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}}


def tools() -> list[dict[str, object]]:
    if MODE == "twice":
        return [
            {"name": "lookup", "description": "the first", "inputSchema": SCHEMA},
            {"name": "lookup", "description": "the second", "inputSchema": SCHEMA},
            {"name": "other", "description": "another", "inputSchema": SCHEMA},
        ]
    if MODE == "empty-name":
        return [
            {"name": "", "description": "nameless", "inputSchema": SCHEMA},
            {"name": " ", "description": "blank", "inputSchema": SCHEMA},
            {"name": "lookup", "description": "look a key up", "inputSchema": SCHEMA},
        ]
    if MODE == "untyped":
        return [{"name": "help", "inputSchema": {}}]
    if MODE == "no-properties":
        return [{"name": "help", "inputSchema": {"type": "object"}}]
    if MODE == "catastrophic-pattern":
        name = {"type": "string", "pattern": "^(a+)+$"}
        match = {"type": "object", "properties": {"name": name}, "required": ["name"]}
        return [
            {"name": "lookup", "description": "look a key up", "inputSchema": SCHEMA},
            {"name": "match", "description": "a name of a's", "inputSchema": match},
        ]
    return [{"name": "lookup", "description": "look a key up", "inputSchema": SCHEMA}]


def call_result(params: dict[str, object]) -> dict[str, object]:
    if MODE == "malformed":
        return {"content": "not a list"}
    text = f"{params['name']} answered"
    return {"content": [{"type": "text", "text": text}]}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue  # a notification
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        result: dict[str, object] = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": tools()}
    elif method == "tools/call":
        result = call_result(params)
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})
