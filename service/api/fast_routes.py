"""Direct dispatch of the hot routes (create and step), past FastAPI's router.

Under load, FastAPI's route matching, dependency solving and exception wrapping
took more CPU than the step itself (about a third of a single-step request
under py-spy). The hot endpoints take nothing but the ``Request``, so this
middleware matches their paths with the routes' own patterns and calls the very
same endpoint functions; their errors go to the app's own exception handlers.
Every other request, and the OpenAPI schema, is FastAPI's as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send


class FastRoutes:
    def __init__(
        self,
        app: ASGIApp,
        routes: Sequence[APIRoute],
        handlers: Mapping[Any, Callable[..., Any]],
    ) -> None:
        """``routes``: endpoints that take only ``request`` and path parameters;
        ``handlers``: the app's exception handlers (``app.exception_handlers``)."""
        self.app = app
        self.routes = routes
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            for route in self.routes:
                match = route.path_regex.match(scope["path"])
                if match is not None:
                    await self._handle(route, match.groupdict(), scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _handle(
        self, route: APIRoute, params: dict[str, str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        scope["route"], scope["path_params"] = route, params
        request = Request(scope, receive)
        try:
            response = await route.endpoint(request=request, **params)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise  # to the server-error middleware, like any other route's
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Callable[..., Any] | None:
        """The app's handler for ``exc``, as Starlette picks it (the nearest class),
        except the catch-all ``Exception`` one, which belongs to the outermost layer."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            handler = self.handlers.get(cls)
            if handler is not None:
                return handler
        return None
