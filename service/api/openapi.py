"""The OpenAPI document: the service's keys as its security scheme, and numeric bounds as
exact as the request models'.

Every operation needs a key (``api.auth``), except the probes: the document says so, so
that ``/docs`` offers to "Authorize" with a key and generated clients send one.

FastAPI passes the document through its own pydantic model of OpenAPI, which types
``minimum``, ``maximum``, their exclusive forms and ``multipleOf`` as floats: ``1``
comes out as ``1.0`` and 2**63 - 1 as 2**63, a bound that admits a number the service
refuses (schemathesis found it). The request models state their 64-bit bounds as
``< 2**63``, a float exactly; this writes every whole-number bound back as an integer,
so the document holds the very numbers the models check.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

PUBLIC_OPERATIONS = frozenset({"/healthz", "/readyz"})
SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `wander keys create`, or an entry of WANDER_API_KEYS. "
        "A service with no key configured takes requests without one.",
    },
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "The same key as Basic auth's password (any user name), for clients "
        "that take only a URL: `http://wander:KEY@host:8000/...`.",
    },
}
BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) give whole-number bounds as integers."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        document = build()  # FastAPI's, built once and kept in app.openapi_schema
        if fresh:
            _integral_bounds(document)
            _secured(document)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _secured(document: dict[str, Any]) -> None:
    document.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    document["security"] = [{"bearer": []}, {"basic": []}]
    for path in PUBLIC_OPERATIONS & document["paths"].keys():
        for operation in document["paths"][path].values():
            operation["security"] = []


def _integral_bounds(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _integral_bounds(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in BOUNDS and isinstance(value, float) and value.is_integer():
                node[key] = int(value)
            else:
                _integral_bounds(value)
