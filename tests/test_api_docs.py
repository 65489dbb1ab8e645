"""``/docs`` and ``/redoc`` render offline: every asset they load comes from the service,
and the OpenAPI document carries examples of the main routes that the wire models accept."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from wander.client import models
from wander.service.app import create_app
from wander.service.settings import Settings

pytestmark = pytest.mark.parametrize("store_kind", ["memory"])  # no store is touched

ASSET_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


@pytest.fixture
async def api(settings: Settings) -> Any:
    """The service without its lifespan: documentation needs neither store nor archive."""
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://wander.test") as client:
        yield client


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_load_only_assets_of_the_service(api: httpx.AsyncClient, page: str) -> None:
    html = await api.get(page)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    page_text = re.sub(r"<!--.*?-->", "", html.text, flags=re.DOTALL)
    assert not re.search(r"(?:https?:)?//", page_text), "an absolute or protocol-relative URL"
    urls = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html.text)
    urls += re.findall(r"""url:\s*["']([^"']+)["']""", html.text)  # Swagger UI's spec URL
    urls += re.findall(r"""spec-url=["']([^"']+)["']""", html.text)  # ReDoc's
    assert "/openapi.json" in urls
    assets = [url for url in urls if url != "/openapi.json"]
    assert {url.rsplit(".", 1)[-1] for url in assets} >= (
        {"js", "png"} | ({"css"} if page == "/docs" else set())
    )
    for url in assets:
        assert url.startswith("/"), url
        asset = await api.get(url)
        assert asset.status_code == 200, url
        expected = ASSET_TYPES["." + url.rsplit(".", 1)[-1]]
        assert expected in asset.headers["content-type"], (url, asset.headers["content-type"])
        # the real asset, not a stand-in: fastapi-offline 1.7.0's favicon is 412 bytes
        assert len(asset.content) > (100 if expected == "image/png" else 1000), url
        assert expected != "image/png" or asset.content.startswith(b"\x89PNG"), url


EXAMPLED = [
    models.CreateEpisodesRequest,
    models.CreateEpisodesResponse,
    models.StepRequest,
    models.StepResult,
    models.BatchStepItem,
    models.BatchStepRequest,
    models.BatchStepResponse,
    models.Score,
    models.EnvironmentsResponse,
    models.EnvInfo,
]


async def test_the_main_routes_carry_examples_their_models_accept(
    api: httpx.AsyncClient,
) -> None:
    schema = (await api.get("/openapi.json")).json()
    components = schema["components"]["schemas"]
    for model in EXAMPLED:
        examples = components[model.__name__].get("examples")
        assert examples, f"{model.__name__} has no example"
        for example in examples:
            _validates(model, example)
    paths = schema["paths"]
    documented = {
        ("/v1/episodes", "post", "201"),
        ("/v1/episodes/{episode_id}/step", "post", "200"),
        ("/v1/step", "post", "200"),
        ("/v1/episodes/{episode_id}/score", "get", "200"),
        ("/v1/environments", "get", "200"),
        ("/v1/environments/{name}", "get", "200"),
    }
    for path, method, status in documented:
        body = paths[path][method]["responses"][status]["content"]["application/json"]["schema"]
        name = body["$ref"].rsplit("/", 1)[-1]
        assert components[name].get("examples"), (path, name)


def _validates(model: type[BaseModel], example: Any) -> None:
    parsed = model.model_validate(example)
    dumped = parsed.model_dump(mode="json", exclude_unset=True)
    assert dumped == example, f"{model.__name__}'s example has fields the model drops"


BOUNDS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}


def _bounds(node: Any) -> list[Any]:
    if isinstance(node, list):
        return [bound for item in node for bound in _bounds(item)]
    if isinstance(node, dict):
        return [bound for key, value in node.items()
                for bound in ([value] if key in BOUNDS else _bounds(value))]  # fmt: skip
    return []


async def test_the_documents_bounds_are_the_models_exact_numbers(api: httpx.AsyncClient) -> None:
    """Not floats: as one, 2**63 - 1 would read 2**63, a number the service refuses."""
    schema = (await api.get("/openapi.json")).json()
    bounds = _bounds(schema)
    assert bounds and all(isinstance(bound, int) for bound in bounds), bounds
    step = schema["components"]["schemas"]["StepRequest"]["properties"]["turn"]["anyOf"][0]
    assert step == {"type": "integer", "minimum": 0, "exclusiveMaximum": 2**63}
