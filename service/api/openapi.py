"""The OpenAPI document, with its numeric bounds as exact as the request models'.

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

BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) give whole-number bounds as integers."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        document = build()  # FastAPI's, built once and kept in app.openapi_schema
        if fresh:
            _integral_bounds(document)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


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
