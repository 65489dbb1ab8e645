"""One bad item of a batch fails alone: the others apply.

The contract is docs/api.md#post-v1step-many-steps-at-once. The attack it guards against:
3 tic-tac-toe steps and 1 reasoning-gym answer whose scorer raises (``int('nan')`` inside
reasoning-gym) made the whole batch a 500, 0 of 3 applied.
A malformed answer is now a wrong answer, scored 0, so all four apply; an item whose
environment raises fails alone with ``env_error`` (tests/test_env_errors.py).
"""

from __future__ import annotations

import httpx

from tests.helpers import create


async def test_an_answer_its_scorer_cannot_read_does_not_fail_the_batch(
    api: httpx.AsyncClient,
) -> None:
    games = [(await create(api, example=i))[0] for i in range(3)]
    [question] = await create(api, env="rg/prime_factorization", example=0)
    steps = [{"episode_id": game["id"], "action": "<move>4</move>", "turn": 0} for game in games]
    steps.insert(2, {"episode_id": question["id"], "action": "<answer>nan</answer>", "turn": 0})

    response = await api.post("/v1/step", json={"steps": steps})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["episode_id"] for r in results] == [s["episode_id"] for s in steps]
    assert [r["turn"] for r in results] == [1, 1, 1, 1]
    assert results[2]["done"] is True
    for game in games:
        record = (await api.get(f"/v1/episodes/{game['id']}")).json()
        assert record["turn"] == 1
    score = (await api.get(f"/v1/episodes/{question['id']}/score")).json()
    assert score["components"]["correct"] == 0.0
    assert score["metrics"]["scorer_error"] == "ValueError"
