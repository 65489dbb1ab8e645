"""What is scored is bounded: answers that took seconds to score are cheap.

double_check with ``<answer>`` x 8000 took 2.5 s and reverse_text with
``<reversed_text>`` x 4000 2.1 s (regular expressions backtracking from every opening
tag), reverse_text's matcher 2.7 s on a 64 KB answer (its cost is the product of the
lengths). The tags are now found in linear time, and reverse_text matches at most
twice the text's length of an answer. An environment may also take smaller actions
than the service (``Environment.max_action_bytes``).
"""

from __future__ import annotations

import random
import time
from difflib import SequenceMatcher

import httpx
import pytest

from tests.helpers import IN_THE_SHARED_LOOP, create, error_of, step
from wander.service.envs.reverse_text.env import SCORED_LENGTH, ReverseText, lcs_ratio

SHARED_SERVICE = True


async def timed_step(api: httpx.AsyncClient, env: str, content: str) -> httpx.Response:
    [episode] = await create(api, env=env, example=0)
    started = time.perf_counter()
    response = await step(api, episode["id"], content, 0)
    print(f"{env}, {len(content)} characters: {(time.perf_counter() - started) * 1000:.0f} ms")
    assert response.status_code == 200, response.text
    return response


@IN_THE_SHARED_LOOP
async def test_double_check_with_8000_opening_tags(api: httpx.AsyncClient) -> None:
    response = await timed_step(api, "double_check", "<answer>" * 8000)
    assert response.json()["info"]["answers"] == [None]
    assert response.json()["done"] is False  # "Are you sure?" comes next, as for any answer


@IN_THE_SHARED_LOOP
async def test_reverse_text_with_4000_opening_tags(api: httpx.AsyncClient) -> None:
    response = await timed_step(api, "reverse_text", "<reversed_text>" * 4000)
    [episode_id] = [response.json()["episode_id"]]
    score = (await api.get(f"/v1/episodes/{episode_id}/score")).json()
    assert score["components"] == {"lcs": 0.0, "format": 0.0}


@IN_THE_SHARED_LOOP
@pytest.mark.parametrize("where", ["first", "last"])
async def test_reverse_text_scores_the_beginning_of_a_64_kb_answer(
    api: httpx.AsyncClient, where: str
) -> None:
    """The right reversal, then 64 KB of filler, scores what difflib would; after the
    filler, it is past what is matched and scores 0: the bound was applied."""
    [episode] = await create(api, env="reverse_text", example=0)
    reversed_text = episode["observation"][1]["content"][::-1]
    filler = "^" * 63_000
    assert "^" not in reversed_text
    answer = reversed_text + filler if where == "first" else filler + reversed_text
    response = await step(api, episode["id"], f"<reversed_text>{answer}</reversed_text>", 0)
    assert response.status_code == 200, response.text
    score = (await api.get(f"/v1/episodes/{episode['id']}/score")).json()
    n = len(reversed_text)
    expected = 2 * n / (len(answer) + n) if where == "first" else 0.0
    assert score["components"] == {"lcs": expected, "format": 1.0}


def test_lcs_ratio_is_difflibs_up_to_twice_the_text() -> None:
    rng = random.Random(20)
    for _ in range(500):
        target = "".join(rng.choices("abc ", k=rng.randint(0, 40)))
        answer = "".join(rng.choices("abcd ", k=rng.randint(0, SCORED_LENGTH * len(target))))
        expected = SequenceMatcher(None, answer, target, autojunk=False).ratio()
        assert lcs_ratio(answer, target) == expected, (answer, target)


@IN_THE_SHARED_LOOP
async def test_an_environment_may_take_smaller_actions_than_the_service(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ReverseText, "max_action_bytes", 1024)
    [episode] = await create(api, env="reverse_text", example=0)
    response = await step(api, episode["id"], "x" * 2000, 0)
    assert response.status_code == 413, response.text
    error = error_of(response)
    assert error["code"] == "payload_too_large"
    assert "1024" in error["message"] and "'reverse_text'" in error["message"]
    small = await step(api, episode["id"], "<reversed_text>x</reversed_text>", 0)
    assert small.status_code == 200, small.text
