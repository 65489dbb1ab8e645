"""MCP's own Python client (``mcp``, from PyPI) against a Wander tool environment's MCP
endpoint: ``python -m tests.mcp_client URL CALLS`` with the python of a venv holding
``mcp`` (the tests' ``verifiers`` venv). It connects as any MCP client does (its own
protocol negotiation), lists the tools, makes each call of ``CALLS`` (a JSON list of
``[name, arguments]``) and prints what it got as JSON: the negotiated protocol version,
the tools' names and input schemas, and each call's text content and error flag.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client  # pyright: ignore[reportMissingImports] (interop venv)
from mcp.client.streamable_http import (  # pyright: ignore[reportMissingImports]
    streamable_http_client,
)


async def session(url: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    async with Client(streamable_http_client(url)) as client:
        listed = await client.list_tools()
        results = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            texts = [block.text for block in result.content if block.type == "text"]
            results.append({"text": texts, "is_error": result.is_error})
        return {
            "protocol": client.protocol_version,
            "tools": {tool.name: tool.input_schema for tool in listed.tools},
            "results": results,
        }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(session(sys.argv[1], json.loads(sys.argv[2])))))
