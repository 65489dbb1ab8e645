"""One bad item of a batch fails alone: the others apply (DESIGN §4)."""

from __future__ import annotations

import httpx

from tests.helpers import create


async def test_an_item_whose_environment_raises_fails_alone(api: httpx.AsyncClient) -> None:
    """3 tic-tac-toe steps and 1 reasoning-gym answer its scorer cannot read (``int('nan')``
    raises inside reasoning-gym): the three apply, the fourth is that item's error."""
    games = [(await create(api, example=i))[0] for i in range(3)]
    [question] = await create(api, env="rg/prime_factorization", example=0)
    steps = [{"episode_id": game["id"], "action": "<move>4</move>", "turn": 0} for game in games]
    steps.insert(2, {"episode_id": question["id"], "action": "<answer>nan</answer>", "turn": 0})

    response = await api.post("/v1/step", json={"steps": steps})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["episode_id"] for r in results] == [s["episode_id"] for s in steps]
    failed = results.pop(2)
    assert failed["error"]["code"] == "internal_error"
    assert [r["turn"] for r in results] == [1, 1, 1]
    for game in games:
        record = (await api.get(f"/v1/episodes/{game['id']}")).json()
        assert record["turn"] == 1
    untouched = (await api.get(f"/v1/episodes/{question['id']}")).json()
    assert untouched["turn"] == 0 and untouched["status"] == "active"
