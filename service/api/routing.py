"""``JSONBodyRoute``: FastAPI's own route, with a lighter request handler for JSON bodies.

Creating and stepping episodes are the hot path (a trainer sends thousands of
steps a second), and FastAPI's generic request handler cost more CPU than the
step itself: it parses the body with ``json.loads`` and validates the result in
Python mode, parses the content type with ``email``, and runs its general
dependency solver even when there is nothing to solve. This route keeps
everything FastAPI gives a route (matching, the app's and routers'
``dependencies``, overrides, the exception handlers, the OpenAPI document, which
documents the body parameter as FastAPI always does) and replaces only that
handler, for endpoints that take one JSON body and answer a ready ``Response``:

1. the dependencies (the app's, the routers', the route's and the endpoint's
   own) are solved by FastAPI's solver, before the body is looked at, so an
   ``unauthorized`` caller learns nothing about the body; when there are none,
   the solver is skipped;
2. the body is validated straight from its bytes by pydantic (``validate_json``),
   with the errors FastAPI would give (``loc`` starting with ``"body"``);
3. the endpoint is called with both.

Any other route of a router using this class (no body, or an endpoint that
returns a model) gets FastAPI's standard handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any

import fastapi.routing
from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_typed_return_annotation, solve_dependencies
from fastapi.exceptions import RequestValidationError
from fastapi.params import Form
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from wander.service.api.errors import NOT_JSON
from wander.service.errors import WanderError

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class JSONBodyRoute(APIRoute):
    """FastAPI's route, with the handler described above for one-JSON-body endpoints."""

    def get_route_handler(self) -> Handler:
        route = _as_included(self)
        if route is None or not _takes_one_json_body(route):
            return super().get_route_handler()
        dependant: Dependant = route.dependant
        [body] = dependant.body_params
        adapter: TypeAdapter[Any] = TypeAdapter(body.field_info.annotation)
        rest = dataclasses.replace(dependant, body_params=[])
        solve = _needs_solving(rest)
        overrides = route.dependency_overrides_provider
        endpoint = dependant.call
        assert endpoint is not None

        async def handle(request: Request) -> Response:
            background = None
            if solve:
                solved = await solve_dependencies(
                    request=request,
                    dependant=rest,
                    dependency_overrides_provider=overrides,
                    async_exit_stack=request.scope["fastapi_inner_astack"],
                    embed_body_fields=False,
                )
                if solved.errors:
                    raise RequestValidationError(solved.errors)
                values, background = solved.values, solved.background_tasks
            else:
                values = {p.name: request.path_params[p.alias] for p in rest.path_params}
                if rest.request_param_name:
                    values[rest.request_param_name] = request
            values[body.name] = await parse_json_body(request, adapter)
            response: Response = await endpoint(**values)
            if response.background is None:
                response.background = background
            return response

        return handle


async def parse_json_body(request: Request, adapter: TypeAdapter[Any]) -> Any:
    """The JSON body, validated from its bytes, with the errors FastAPI's parsing gives."""
    if not is_json(request.headers.get("content-type", "")):
        raise WanderError(NOT_JSON)  # bad_request
    try:
        return adapter.validate_json(await request.body())
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors) from None


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/<something>+json``, any case, parameters
    (``; charset=utf-8``) allowed: a media type, not any header that contains "json"."""
    media = content_type.partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _as_included(route: APIRoute) -> Any | None:
    """The route as FastAPI serves it: with what its inclusion adds (the app's and the
    including routers' dependencies, the overrides provider, the full path).

    FastAPI builds one handler per inclusion of a router and hands that inclusion's
    view of the route to ``get_route_handler`` in a context variable, which its own
    ``APIRoute.get_route_handler`` reads; there is no public way to get it. None when
    this FastAPI has no such variable: the caller then keeps FastAPI's standard
    handler, slower but never missing a dependency."""
    var = getattr(fastapi.routing, "_effective_route_context_var", None)
    if var is None:
        return None
    context = var.get()
    return context if context is not None and context.original_route is route else route


def _takes_one_json_body(route: Any) -> bool:
    """One JSON body parameter of the endpoint itself, and a ``Response`` returned."""
    dependant: Dependant = route.dependant
    returns = get_typed_return_annotation(dependant.call)
    return (
        len(dependant.body_params) == 1
        and route.body_field is dependant.body_params[0]  # not embedded, none in dependencies
        and not isinstance(route.body_field.field_info, Form)
        and isinstance(returns, type)
        and issubclass(returns, Response)
    )


def _needs_solving(dependant: Dependant) -> bool:
    """Whether anything but the request and the path parameters is asked for."""
    return bool(
        dependant.dependencies
        or dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or any(field.field_info.annotation is not str for field in dependant.path_params)
    )
