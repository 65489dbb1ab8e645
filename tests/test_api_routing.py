"""Every route, the hot ones (create, step, batch step) included, goes through FastAPI's
router: the app's and the routers' dependencies guard them, and the OpenAPI document
FastAPI generates describes their bodies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Header
from fastapi.openapi.utils import get_openapi

from tests.helpers import asgi_client, error_of
from wander.service.api import episodes
from wander.service.api.auth import AuthMiddleware
from wander.service.api.errors import install_error_handlers
from wander.service.api.openapi import PUBLIC_OPERATIONS, SECURITY_SCHEMES
from wander.service.app import create_app
from wander.service.errors import WanderError
from wander.service.settings import Settings

KEY = "let-me-in"


class Unauthorized(WanderError):
    code = "unauthorized"


async def require_key(x_test_key: str | None = Header(None)) -> None:
    """What an authentication dependency does: refuse a request without the key."""
    if x_test_key != KEY:
        raise Unauthorized("no key")


GUARD = Depends(require_key)


def _app_level(settings: Settings) -> FastAPI:
    return create_app(settings, dependencies=[GUARD])


def _composed(settings: Settings, include: Callable[[FastAPI], None]) -> FastAPI:
    """The episode routes included in an app of the test's own, run by the service's
    lifespan (which puts the engine on whichever app it starts)."""
    app = FastAPI(lifespan=create_app(settings).router.lifespan_context)
    install_error_handlers(app)
    app.add_middleware(AuthMiddleware)  # what tells the routes who calls
    include(app)
    return app


def _router_level(settings: Settings) -> FastAPI:
    def include(app: FastAPI) -> None:
        guarded = APIRouter(dependencies=[GUARD])
        guarded.include_router(episodes.router)
        app.include_router(guarded)

    return _composed(settings, include)


def _include_level(settings: Settings) -> FastAPI:
    return _composed(
        settings, lambda app: app.include_router(episodes.router, dependencies=[GUARD])
    )


@pytest.mark.parametrize("store_kind", ["memory"])  # the HTTP layer is the same on both
@pytest.mark.parametrize("build", [_app_level, _router_level, _include_level])
async def test_a_dependency_guards_create_step_and_batch(
    settings: Settings, build: Callable[[Settings], FastAPI]
) -> None:
    async with asgi_client(build(settings)) as api:
        keyed = {"x-test-key": KEY}
        created = await api.post("/v1/episodes", json={"env": "tictactoe"}, headers=keyed)
        assert created.status_code == 201, created.text
        episode_id = created.json()["episodes"][0]["id"]
        step = {"action": "<move>4</move>", "turn": 0}
        requests: list[tuple[str, Any]] = [
            ("/v1/episodes", {"env": "tictactoe"}),
            (f"/v1/episodes/{episode_id}/step", step),
            ("/v1/step", {"steps": [{"episode_id": episode_id, **step}]}),
            ("/v1/episodes", {"env": 7}),  # refused before the body is looked at
            ("/v1/step", {"steps": "nonsense"}),
        ]
        for path, body in requests:
            refused = await api.post(path, json=body)
            assert refused.status_code == 401, (path, refused.text)
            assert error_of(refused)["code"] == "unauthorized"
        refused = await api.get(f"/v1/episodes/{episode_id}/score", params={"partial": True})
        assert refused.status_code == 401
        stepped = await api.post(f"/v1/episodes/{episode_id}/step", json=step, headers=keyed)
        assert stepped.status_code == 200, stepped.text
        assert stepped.json()["turn"] == 1  # the refused step and batch applied nothing
        batch = {"steps": [{"episode_id": episode_id, "action": "<move>0</move>", "turn": 1}]}
        batched = await api.post("/v1/step", json=batch, headers=keyed)
        assert batched.status_code == 200, batched.text
        assert batched.json()["results"][0]["turn"] == 2


@pytest.mark.parametrize("store_kind", ["memory"])
async def test_openapi_describes_the_bodies_of_the_hot_routes(settings: Settings) -> None:
    service = create_app(settings)  # the document needs no lifespan
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=service), base_url="http://wander.test"
    ) as api:
        schema = (await api.get("/openapi.json")).json()
    generated = get_openapi(
        title=service.title, version=service.version, summary=service.summary, routes=service.routes
    )
    # FastAPI's own document, with the keys' security schemes added and nothing else.
    assert schema["components"].pop("securitySchemes") == SECURITY_SCHEMES
    assert schema.pop("security") == [{"bearer": []}, {"basic": []}]
    for probe in PUBLIC_OPERATIONS:
        assert schema["paths"][probe]["get"].pop("security") == []
    assert schema == generated
    bodies = {
        ("/v1/episodes", "201"): ("CreateEpisodesRequest", "CreateEpisodesResponse"),
        ("/v1/episodes/{episode_id}/step", "200"): ("StepRequest", "StepResult"),
        ("/v1/step", "200"): ("BatchStepRequest", "BatchStepResponse"),
    }
    components = schema["components"]["schemas"]
    for (path, status), (request, response) in bodies.items():
        operation = schema["paths"][path]["post"]
        assert operation["requestBody"]["required"] is True
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{request}"}
        answer = operation["responses"][status]["content"]["application/json"]["schema"]
        assert answer == {"$ref": f"#/components/schemas/{response}"}
        assert operation["responses"]["422"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorResponse"
        }
    assert components["CreateEpisodesRequest"]["required"] == ["env"]
    assert components["StepRequest"]["required"] == ["action"]
    assert set(components["BatchStepRequest"]["properties"]) == {"steps"}
