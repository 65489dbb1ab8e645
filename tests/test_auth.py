"""API keys, roles and tenants on every route, on both stores, through ASGI.

Keys come from ``WANDER_API_KEYS`` here; ``test_keys.py`` covers the archive's keys and
their CLI, ``test_auth_live.py`` rate limits and quotas against a real server.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import asgi_client, error_of, service
from wander.service.app import create_app
from wander.service.settings import Settings

KEYS = {
    "alpha-agent": "alpha:agent:alpha-agent-secret-0001",
    "alpha-trainer": "alpha:trainer:alpha-trainer-secret-0002",
    "beta-agent": "beta:agent:beta-agent-secret-0003",
    "beta-trainer": "beta:trainer:beta-trainer-secret-0004",
    "ops-admin": "ops:admin:ops-admin-secret-0005",
}
SECRETS = {name: entry.split(":", 2)[2] for name, entry in KEYS.items()}
PUBLIC = {"/healthz", "/readyz"}
UNKNOWN_ID = "ep_doesnotexist00000000"


def keyed(settings: Settings, **extra: Any) -> Settings:
    return Settings(
        redis_url=settings.redis_url,
        redis_prefix=settings.redis_prefix,
        database_url=settings.database_url,
        api_keys=",".join(KEYS.values()),
        **extra,
    )


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[name]}"}


@pytest.fixture
async def wander(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    async with service(keyed(settings)) as (app, api):
        yield app, api


@pytest.fixture
def audit_lines() -> Iterator[list[logging.LogRecord]]:
    """What the audit logger writes during the test."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("wander.service.audit")
    handler = Keep()
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (method, concrete path) of the OpenAPI document, path parameters filled in."""
    found = []
    for template, methods in document["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x", template)
        found += [(method.upper(), path) for method in methods]
    return found


async def test_every_route_but_the_probes_needs_a_key(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    document = (await api.get("/openapi.json")).json()
    routes = operations(document)
    assert len(routes) > 20
    refused = 0
    for method, path in routes:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-key"},
            {"Authorization": "Token alpha-agent-secret-0001"},
            {"Authorization": "Basic !!not-base64"},
        ):
            response = await api.request(method, path, headers=headers)
            if path in PUBLIC:
                assert response.status_code == 200, (method, path)
                continue
            assert response.status_code == 401, (method, path, headers, response.text)
            assert error_of(response)["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
            refused += 1
    assert refused >= 4 * (len(routes) - len(PUBLIC))
    # The documentation holds no data: a browser loads it, and authorizes with a key there.
    assert (await api.get("/docs")).status_code == 200
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document["paths"]["/healthz"]["get"]["security"] == []


async def test_a_revoked_key_is_refused_on_every_route(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    admin = bearer("ops-admin")
    created = await api.post("/v1/admin/keys", json={"tenant": "alpha", "role": "admin"},
                             headers=admin)  # fmt: skip
    assert created.status_code == 201, created.text
    key = created.json()
    revoked = {"Authorization": f"Bearer {key['key']}"}
    assert (await api.get("/v1/environments", headers=revoked)).status_code == 200
    assert (await api.delete(f"/v1/admin/keys/{key['id']}", headers=admin)).status_code == 204
    document = (await api.get("/openapi.json")).json()
    for method, path in operations(document):
        response = await api.request(method, path, headers=revoked)
        expected = 200 if path in PUBLIC else 401
        assert response.status_code == expected, (method, path, response.text)


async def test_roles_reach_what_they_may(wander: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, api = wander
    expected = {
        # path: (agent, trainer, admin)
        "/v1/environments": (200, 200, 200),
        "/v1/runs": (403, 200, 200),
        "/metrics": (403, 403, 200),
        "/v1/admin/dead-letters": (403, 403, 200),
    }
    for path, statuses in expected.items():
        for name, status in zip(
            ("alpha-agent", "alpha-trainer", "ops-admin"), statuses, strict=True
        ):
            response = await api.get(path, headers=bearer(name))
            assert response.status_code == status, (path, name, response.text)
            if status == 403:
                assert error_of(response)["code"] == "forbidden"


async def test_roles_hold_under_a_root_path(settings: Settings) -> None:
    """Served under a prefix (``uvicorn --root-path``, or mounted in another app), the
    paths the service sees start with it: the role a route needs is still its own."""
    async with asgi_client(create_app(keyed(settings)), root_path="/wander") as api:
        agent, trainer = bearer("alpha-agent"), bearer("alpha-trainer")
        for path in ("/wander/metrics", "/wander/v1/admin/keys", "/wander/v1/runs"):
            refused = await api.get(path, headers=agent)
            assert refused.status_code == 403, (path, refused.text)
        admin = {"tenant": "alpha", "role": "admin"}
        refused = await api.post("/wander/v1/admin/keys", json=admin, headers=agent)
        assert refused.status_code == 403, refused.text
        assert (await api.get("/wander/v1/runs", headers=trainer)).status_code == 200
        assert (await api.get("/wander/v1/environments")).status_code == 401
        assert (await api.get("/wander/healthz")).status_code == 200


async def test_a_key_also_works_as_basic_auth_password(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    token = base64.b64encode(f"wander:{SECRETS['alpha-agent']}".encode()).decode()
    response = await api.get("/v1/environments", headers={"Authorization": f"Basic {token}"})
    assert response.status_code == 200
    anonymous = httpx.BasicAuth("wander", SECRETS["alpha-agent"])
    assert (await api.get("/v1/environments", auth=anonymous)).status_code == 200


def _not_found(response: httpx.Response, episode_id: str) -> dict[str, Any]:
    """The error, with the id it names replaced: what must not tell two ids apart."""
    assert response.status_code == 404, response.text
    error = error_of(response)
    return {**error, "message": error["message"].replace(episode_id, "ID")}


async def test_another_tenants_episode_is_an_unknown_one_on_every_route(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    alpha, beta = bearer("alpha-agent"), bearer("beta-agent")
    created = await api.post("/v1/episodes", json={"env": "tictactoe", "seed": 3}, headers=alpha)
    assert created.status_code == 201
    [episode] = created.json()["episodes"]
    theirs = episode["id"]

    async def answers(episode_id: str) -> list[dict[str, Any]]:
        step_body = {"action": "<move>1</move>", "turn": 0}
        batch = {"steps": [{"episode_id": episode_id, **step_body}]}
        responses = [
            await api.get(f"/v1/episodes/{episode_id}", headers=beta),
            await api.get(f"/v1/episodes/{episode_id}/score?partial=true", headers=beta),
            await api.post(f"/v1/episodes/{episode_id}/step", json=step_body, headers=beta),
            await api.delete(f"/v1/episodes/{episode_id}", headers=beta),
            await api.get(f"/openenv/tictactoe/state?episode_id={episode_id}", headers=beta),
            await api.post(
                "/openenv/tictactoe/step",
                json={"action": {"content": "<move>1</move>"}, "episode_id": episode_id},
                headers=beta,
            ),
            await api.post(
                "/openenv/tictactoe/reset", json={"episode_id": episode_id}, headers=beta
            ),
        ]
        found = [_not_found(response, episode_id) for response in responses]
        item = (await api.post("/v1/step", json=batch, headers=beta)).json()["results"][0]
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "move", "episode_id": episode_id}}  # fmt: skip
        mcp = (await api.post("/openenv/tictactoe/mcp", json=call, headers=beta)).json()
        for error in (item["error"], mcp["error"]["data"]):
            found.append({**error, "message": error["message"].replace(episode_id, "ID")})
        return found

    assert await answers(theirs) == await answers(UNKNOWN_ID)
    # Nothing beta tried touched the episode: alpha plays on from turn 0.
    played = await api.post(
        f"/v1/episodes/{theirs}/step", json={"action": "<move>1</move>", "turn": 0}, headers=alpha
    )
    assert played.status_code == 200, played.text
    record = (await api.get(f"/v1/episodes/{theirs}", headers=bearer("ops-admin"))).json()
    assert (record["tenant"], record["turn"], record["status"]) == ("alpha", 1, "active")


async def test_an_admin_reaches_every_tenants_episode_on_every_route(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    alpha, admin = bearer("alpha-agent"), bearer("ops-admin")
    created = await api.post("/v1/episodes", json={"env": "tictactoe", "seed": 3}, headers=alpha)
    theirs = created.json()["episodes"][0]["id"]
    moves = [
        api.post(f"/v1/episodes/{theirs}/step", json={"action": "<move>0</move>", "turn": 0},
                 headers=admin),
        api.post("/v1/step", json={"steps": [{"episode_id": theirs, "turn": 1,
                                              "action": "<move>1</move>"}]}, headers=admin),
        api.post("/openenv/tictactoe/step", headers=admin, json={
            "action": {"content": "<move>2</move>"}, "episode_id": theirs, "turn": 2}),
    ]  # fmt: skip
    for move in moves:
        answer = await move
        assert answer.status_code == 200, answer.text
        assert "error" not in answer.text, answer.text
    score = await api.get(f"/v1/episodes/{theirs}/score?partial=true", headers=admin)
    assert score.status_code == 200, score.text
    state = await api.get(f"/openenv/tictactoe/state?episode_id={theirs}", headers=admin)
    assert state.json()["step_count"] == 3
    assert (await api.delete(f"/v1/episodes/{theirs}", headers=admin)).status_code == 204
    record = (await api.get(f"/v1/episodes/{theirs}", headers=alpha)).json()
    assert (record["tenant"], record["turn"], record["status"]) == ("alpha", 3, "aborted")


async def test_runs_are_per_tenant_and_an_admin_sees_all(
    wander: tuple[FastAPI, httpx.AsyncClient], audit_lines: list[logging.LogRecord]
) -> None:
    app, api = wander
    for tenant in ("alpha", "beta"):
        headers = bearer(f"{tenant}-trainer")
        created = await api.post(
            "/v1/episodes", json={"env": "tictactoe", "n": 2, "run": "eval"}, headers=headers
        )
        for episode in created.json()["episodes"]:
            assert (
                await api.delete(f"/v1/episodes/{episode['id']}", headers=headers)
            ).status_code == 204
    unlabelled = await api.post(
        "/v1/episodes", json={"env": "tictactoe"}, headers=bearer("beta-trainer")
    )
    gone = await api.delete(
        f"/v1/episodes/{unlabelled.json()['episodes'][0]['id']}", headers=bearer("beta-trainer")
    )
    assert gone.status_code == 204
    await app.state.archiver.flush()

    for tenant in ("alpha", "beta"):
        headers = bearer(f"{tenant}-trainer")
        runs = (await api.get("/v1/runs", headers=headers)).json()
        assert [(r["run"], r["tenant"], r["episodes"]) for r in runs["runs"]] == [
            ("eval", tenant, 2)
        ]
        assert (runs["tenant"], runs["unlabelled"]) == (tenant, int(tenant == "beta"))
        summary = (await api.get("/v1/runs/eval", headers=headers)).json()
        assert summary["episodes"] == 2
        page = (await api.get("/v1/runs/eval/episodes", headers=headers)).json()
        assert {e["tenant"] for e in page["episodes"]} == {tenant}
        export = await api.get("/v1/runs/eval/episodes?format=jsonl", headers=headers)
        assert len(export.text.splitlines()) == 2
    exports = [(r.__dict__["tenant"], r.__dict__["key_id"]) for r in audit_lines
               if r.__dict__.get("exported") == "eval"]  # fmt: skip
    assert exports == [("alpha", "env-alpha-trainer-2"), ("beta", "env-beta-trainer-4")]
    admin = bearer("ops-admin")
    listed = (await api.get("/v1/runs", headers=admin)).json()
    assert sorted((r["run"], r["tenant"]) for r in listed["runs"]) == [
        ("eval", "alpha"), ("eval", "beta")
    ]  # fmt: skip
    assert (listed["tenant"], listed["unlabelled"]) == (None, 1)
    # An admin's summary and export of a label cover every tenant that used it.
    summary = (await api.get("/v1/runs/eval", headers=admin)).json()
    assert (summary["tenant"], summary["episodes"]) == (None, 4)
    page = (await api.get("/v1/runs/eval/episodes", headers=admin)).json()
    assert sorted(e["tenant"] for e in page["episodes"]) == ["alpha", "alpha", "beta", "beta"]
    export = await api.get("/v1/runs/eval/episodes?format=jsonl", headers=admin)
    assert len(export.text.splitlines()) == 4


async def test_a_run_of_another_tenant_is_not_found(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = wander
    alpha = bearer("alpha-trainer")
    [episode] = (
        await api.post("/v1/episodes", json={"env": "tictactoe", "run": "mine"}, headers=alpha)
    ).json()["episodes"]
    await api.delete(f"/v1/episodes/{episode['id']}", headers=alpha)
    await app.state.archiver.flush()
    beta = bearer("beta-trainer")
    for path in ("/v1/runs/mine", "/v1/runs/mine/episodes", "/v1/runs/mine/episodes?format=jsonl"):
        theirs = await api.get(path, headers=beta)
        unknown = await api.get(path.replace("mine", "nobodys"), headers=beta)
        assert theirs.status_code == unknown.status_code == 404, path
        assert error_of(theirs)["code"] == "run_not_found"
    assert (await api.get("/v1/runs/mine", headers=alpha)).status_code == 200


async def test_group_and_batch_quotas_of_a_role(wander: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, api = wander
    agent = bearer("alpha-agent")
    too_many = await api.post("/v1/episodes", json={"env": "tictactoe", "n": 17}, headers=agent)
    assert too_many.status_code == 429
    assert error_of(too_many)["code"] == "quota_exceeded"
    assert error_of(too_many)["details"] == {"quota": "group_size", "limit": 16, "requested": 17}
    assert "retry-after" not in too_many.headers  # waiting would not help
    batch = {"steps": [{"episode_id": UNKNOWN_ID, "action": "x"}] * 65}
    refused = await api.post("/v1/step", json=batch, headers=agent)
    assert refused.status_code == 429
    assert error_of(refused)["details"]["quota"] == "batch_steps"
    trainer = bearer("alpha-trainer")
    allowed = await api.post("/v1/episodes", json={"env": "tictactoe", "n": 17}, headers=trainer)
    assert allowed.status_code == 201


async def test_audit_lines_name_the_tenant_and_key_id_never_the_key(
    wander: tuple[FastAPI, httpx.AsyncClient], audit_lines: list[logging.LogRecord]
) -> None:
    _, api = wander
    agent = bearer("alpha-agent")
    [episode] = (await api.post("/v1/episodes", json={"env": "tictactoe"}, headers=agent)).json()[
        "episodes"
    ]
    await api.post(f"/v1/episodes/{episode['id']}/step", json={"action": "<move>1</move>"},
                   headers=agent)  # fmt: skip
    batch = {"steps": [{"episode_id": episode["id"], "action": "<move>2</move>"}]}
    await api.post("/v1/step", json=batch, headers=agent)
    await api.delete(f"/v1/episodes/{episode['id']}", headers=agent)
    await api.get("/v1/runs", headers=agent)  # forbidden: refused before any route
    lines = [record.__dict__ for record in audit_lines]
    assert [(line["method"], line["route"], line["status"]) for line in lines] == [
        ("POST", "/v1/episodes", 201),
        ("POST", "/v1/episodes/{episode_id}/step", 200),
        ("POST", "/v1/step", 200),
        ("DELETE", "/v1/episodes/{episode_id}", 204),
    ]
    assert {(line["tenant"], line["key_id"]) for line in lines} == {("alpha", "env-alpha-agent-1")}
    assert lines[0]["episode_ids"] == lines[2]["episode_ids"] == [episode["id"]]
    assert SECRETS["alpha-agent"] not in json.dumps(lines, default=str)


async def test_openenv_audit_lines_name_the_episode_created_or_played(
    wander: tuple[FastAPI, httpx.AsyncClient], audit_lines: list[logging.LogRecord]
) -> None:
    """OpenEnv's routes carry the episode in the body or create it: the path does not
    say which, so the line must."""
    _, api = wander
    agent = bearer("alpha-agent")
    reset = await api.post("/openenv/tictactoe/reset", json={"seed": 1}, headers=agent)
    episode_id = reset.json()["observation"]["metadata"]["episode_id"]
    step = {"action": {"content": "<move>1</move>"}, "episode_id": episode_id}
    assert (await api.post("/openenv/tictactoe/step", json=step, headers=agent)).is_success
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "move", "episode_id": episode_id}}  # fmt: skip
    await api.post("/openenv/tictactoe/mcp", json=call, headers=agent)
    lines = [record.__dict__ for record in audit_lines]
    assert [(line["route"].rsplit("/", 1)[1], line.get("episode_ids")) for line in lines] == [
        ("reset", [episode_id]),
        ("step", [episode_id]),
        ("mcp", [episode_id]),
    ]


async def test_key_use_is_counted_per_key_in_metrics(
    wander: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = wander
    await api.get("/v1/environments", headers=bearer("beta-agent"))
    await api.get("/v1/runs", headers=bearer("beta-agent"))
    text = (await api.get("/metrics", headers=bearer("ops-admin"))).text
    assert re.search(
        r'wander_key_requests_total\{key="env-beta-agent-3",outcome="ok"\} [1-9]', text
    )
    assert re.search(
        r'wander_key_requests_total\{key="env-beta-agent-3",outcome="forbidden"\} [1-9]', text
    )
    assert SECRETS["beta-agent"] not in text


async def test_an_open_service_takes_requests_without_a_key(api: httpx.AsyncClient) -> None:
    assert (await api.get("/v1/runs")).status_code == 200
    created = await api.post("/v1/episodes", json={"env": "tictactoe", "n": 300})
    assert created.status_code == 422  # the service's own limit, not a quota


@pytest.mark.parametrize(
    ("keys", "auth", "says"),
    [
        ("s3cret", None, "entry 1 is not `tenant:role:key`"),
        ("alpha:agent:s3cret,Alpha:agent:s3cret2", None, "entry 2: the tenant must be"),
        ("alpha:owner:s3cret", None, "the role must be one of agent, trainer, admin"),
        ("alpha:agent:s3cret,beta:agent:s3cret", None, "entry 2 repeats the key"),
        ("alpha:agent:s3cret", "open", "WANDER_AUTH=open, but WANDER_API_KEYS lists keys"),
    ],
)
def test_keys_the_service_cannot_apply_stop_it(keys: str, auth: str | None, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as raised:
        Settings(api_keys=keys, auth=auth)
    assert "s3cret" not in str(raised.value)  # nor is the setting, in the error or a traceback


def test_keys_required_follows_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not Settings().requires_keys
    assert Settings(api_keys="a:agent:k").requires_keys
    assert Settings(auth="keys").requires_keys
    assert not Settings(api_keys=" ").requires_keys
    # Empty, as compose passes a variable that is not set (`${WANDER_AUTH:-}`): unset.
    monkeypatch.setenv("WANDER_AUTH", "")
    assert not Settings().requires_keys
    monkeypatch.setenv("WANDER_API_KEYS", "a:agent:k")
    assert Settings().requires_keys


async def test_a_keyed_service_with_no_key_refuses_everyone(sqlite_url: str) -> None:
    from wander.service.archive.migrations import upgrade

    upgrade(sqlite_url)
    async with service(Settings(database_url=sqlite_url, auth="keys")) as (_, api):
        assert (await api.get("/v1/environments")).status_code == 401
        assert (await api.get("/healthz")).status_code == 200


async def test_an_unmigrated_archive_starts_open_and_says_503_to_keys_it_cannot_look_up(
    empty_database_url: str,
) -> None:
    """An open service starts before `wander db upgrade`, as it always did (readiness says
    why it is not ready); a keyed one answers a key it cannot look up with a retryable 503,
    never a 500 or a 401 the database would contradict once migrated."""
    async with service(Settings(redis_url=None, database_url=empty_database_url)) as (_, api):
        assert (await api.get("/v1/environments")).status_code == 200
        assert error_of(await api.get("/readyz"))["code"] == "database_unavailable"
    keyed = Settings(redis_url=None, database_url=empty_database_url, auth="keys")
    async with service(keyed) as (_, api):
        response = await api.get("/v1/environments", headers={"Authorization": "Bearer wdr_x"})
        assert response.status_code == 503
        assert error_of(response)["code"] == "database_unavailable"
        assert "wander db upgrade" in error_of(response)["message"]


async def test_an_admins_own_episodes_use_no_quota_of_its_tenant(settings: Settings) -> None:
    """An admin's 13,700 episodes once locked its tenant's agent key out (429)."""
    keys = "alpha:agent:alpha-agent-secret-0001,alpha:admin:alpha-admin-secret-0006"
    limits = {"api_keys": keys}
    async with service(Settings(**{**settings.model_dump(), **limits})) as (_, api):
        admin = {"Authorization": "Bearer alpha-admin-secret-0006"}
        for _ in range(4):  # the agent role's 1,000 live episodes, held by the admin
            body = {"env": "tictactoe", "n": 250}
            created = await api.post("/v1/episodes", json=body, headers=admin)
            assert created.status_code == 201, created.text
        agent = {"Authorization": "Bearer alpha-agent-secret-0001"}
        mine = await api.post("/v1/episodes", json={"env": "tictactoe"}, headers=agent)
        assert mine.status_code == 201, mine.text
        [episode] = mine.json()["episodes"]
        seen = await api.get(f"/v1/episodes/{episode['id']}", headers=admin)
        assert seen.status_code == 200  # the admin still sees its tenant's episodes
