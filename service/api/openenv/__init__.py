"""The OpenEnv surface: every environment at ``/openenv/{env}``, in OpenEnv 0.10's shapes.

``http`` holds the HTTP routes, ``ws`` the WebSocket session; both drive a ``Session``
(``session``), which plays a stored Wander episode through the engine. ``wire`` holds
the OpenEnv models, ``actions`` turns OpenEnv actions into Wander actions, ``mcp``
answers MCP's JSON-RPC.
"""

from __future__ import annotations

from fastapi import APIRouter

from wander.service.api.openenv import http, ws

router = APIRouter()
router.include_router(http.router)
router.include_router(ws.router)

__all__ = ["router"]
