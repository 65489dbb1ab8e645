"""The evaluation runner and the policies, through the client, against the service."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp
from typer.testing import CliRunner

from wander.cli import app as cli
from wander.client import AssistantMessage, AsyncWanderClient, Message
from wander.client.errors import PolicyEndpointError
from wander.client.evaluation import evaluate
from wander.client.policies import LatestTurn, MinimaxPolicy, OpenAIChatPolicy, RandomPolicy
from wander.client.policies.tictactoe import (
    NotATicTacToePrompt,
    best_moves,
    likeliest_win,
    read_board,
)
from wander.client.policy_server import create_policy_app
from wander.client.report import plot
from wander.client.retry import NO_RETRY
from wander.extras import install_command
from wander.service.envs.seeding import example_seed
from wander.service.envs.tictactoe import TicTacToe, TicTacToeConfig
from wander.service.envs.tictactoe.env import render_board
from wander.service.envs.tictactoe.game import (
    EMPTY_BOARD,
    legal_moves,
    optimal_moves,
    place,
    positions,
    winner,
)
from wander.testing import ServiceProcess, free_port, wait_until

OPTIMAL = {"min_random_move_prob": 0.0, "max_random_move_prob": 0.0}


def asgi_client(app: ASGIApp) -> AsyncWanderClient:
    return AsyncWanderClient("http://wander.test", transport=httpx.ASGITransport(app=app))


async def archived_summary(wander: AsyncWanderClient, run: str, episodes: int) -> Any:
    for _ in range(100):
        runs = {info.run: info.episodes for info in (await wander.runs()).runs}
        if runs.get(run) == episodes:
            return await wander.run(run)
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run} was not archived")


async def test_baselines_against_the_optimal_opponent(app: ASGIApp) -> None:
    async with asgi_client(app) as wander:
        options: dict[str, Any] = {"examples": 15, "rollouts": 2, "config": OPTIMAL}
        best = await evaluate(
            wander, "tictactoe", MinimaxPolicy(seed=1), run="minimax", progress=False, **options
        )
        worst = await evaluate(
            wander, "tictactoe", RandomPolicy(seed=1), run="random", progress=False, **options
        )
        assert best.summary.errors == worst.summary.errors == 0
        assert {r.metrics["outcome"] for r in best.results} == {"draw"}
        assert "win" not in {r.metrics["outcome"] for r in worst.results}
        assert [r.example for r in best.results] == sorted(list(range(15)) * 2)

        for evaluation, run in [(best, "minimax"), (worst, "random")]:
            archived = await archived_summary(wander, run, 30)
            ours = evaluation.summary
            assert archived.metrics["outcome"].rates == ours.metrics["outcome"].rates
            assert (
                archived.metrics["invalid_moves"].nonzero_rate
                == ours.metrics["invalid_moves"].nonzero_rate
            )
            assert math.isclose(archived.reward.mean, ours.reward.mean, abs_tol=1e-12)
            assert archived.components == {k: v.mean for k, v in ours.components.items()}


class Flaky:
    """A policy whose second answer fails."""

    def __init__(self) -> None:
        self.calls = 0

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("model server fell over")
        return AssistantMessage(content="<move>0</move>")


async def test_a_failing_policy_is_an_error_and_its_episode_is_aborted(app: ASGIApp) -> None:
    async with asgi_client(app) as wander:
        evaluation = await evaluate(
            wander, "tictactoe", Flaky(), examples=1, concurrency=1, progress=False
        )
        [result] = evaluation.results
        assert evaluation.summary.errors == 1
        assert result.error == "RuntimeError: model server fell over"
        assert (await wander.episode(result.episode_id)).status == "aborted"


async def live_episodes(app: ASGIApp) -> float:
    """The store's count of live tic-tac-toe episodes (``wander_live_episodes``)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
        text = (await client.get("http://wander.test/metrics")).text
    return next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "wander_live_episodes" and sample.labels == {"env": "tictactoe"}
    )


class Watching(RandomPolicy):
    """The random baseline, noting before each move how many episodes are live."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(seed=0)
        self.app, self.seen = app, [0.0]

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        self.seen.append(await live_episodes(self.app))
        return await super().act(messages, tools)


async def test_concurrency_bounds_the_episodes_open_at_once(app: ASGIApp) -> None:
    """Groups are created as episodes end, not all at the start: a tenant's live-episode
    quota of 4 takes an evaluation of 12 episodes at --concurrency 4."""
    watching = Watching(app)
    async with asgi_client(app) as wander:
        done = await evaluate(
            wander, "tictactoe", watching, examples=6, rollouts=2, concurrency=4, progress=False
        )
    assert (done.summary.episodes, done.summary.errors) == (12, 0)
    assert max(watching.seen) == 4
    assert await live_episodes(app) == 0


async def test_a_seeded_evaluation_repeats_whatever_its_concurrency(app: ASGIApp) -> None:
    def games(evaluation: Any) -> list[tuple[int, float | None, Any]]:
        return sorted((r.example, r.total, r.metrics.get("turns")) for r in evaluation.results)

    played = []
    async with asgi_client(app) as wander:
        for concurrency in (1, 12):
            played.append(games(await evaluate(
                wander, "tictactoe", MinimaxPolicy(noise=0.5, seed=4), examples=6, rollouts=2,
                concurrency=concurrency, progress=False,
            )))  # fmt: skip
    assert played[0] == played[1]
    assert len({total for _, total, _ in played[0]}) > 1  # the noise made different games


class Shown(MinimaxPolicy):
    """The noisy minimax baseline, keeping what it was shown."""

    def __init__(self, seen: list[list[Message]]) -> None:
        super().__init__(noise=0.5, seed=4)
        self.seen = seen

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        self.seen.append(list(messages))
        return await super().act(messages, tools)


async def test_latest_turn_shows_a_policy_the_system_prompt_and_the_latest_turn(
    app: ASGIApp,
) -> None:
    """What a model trained on ``tictactoe_move`` is shown of a whole game; the baseline
    inside plays the very games it plays unwrapped (its seeded choices per episode kept)."""
    whole: list[list[Message]] = []
    latest: list[list[Message]] = []
    async with asgi_client(app) as wander:
        played = [
            await evaluate(
                wander, "tictactoe", policy, examples=6, rollouts=2, concurrency=4,
                progress=False,
            )
            for policy in (Shown(whole), LatestTurn(Shown(latest)))
        ]  # fmt: skip
    games = [sorted((r.example, r.total) for r in evaluation.results) for evaluation in played]
    assert games[0] == games[1]
    assert len({r.total for r in played[0].results}) > 1  # the noise made different games
    assert sorted(len(m) for m in whole)[-1] > 4  # whole games: the conversation grows
    assert {tuple(m.role for m in messages) for messages in latest} == {("system", "user")}
    assert sorted(m[-1].content for m in latest) == sorted(m[-1].content for m in whole)


async def test_a_seeded_evaluation_through_a_served_baseline_repeats(app: ASGIApp) -> None:
    """The README's pipeline: the openai policy sends each episode's seed, the served
    noisy minimax draws from it, so the evaluation repeats at any concurrency."""
    served = create_policy_app(MinimaxPolicy(noise=0.5), "minimax")
    played = []
    async with asgi_client(app) as wander:
        for concurrency in (1, 12):
            policy = OpenAIChatPolicy(
                "minimax", "http://policy.test/v1", seed=0,
                transport=httpx.ASGITransport(app=served),
            )  # fmt: skip
            evaluation = await evaluate(
                wander, "tictactoe", policy, examples=6, rollouts=2, concurrency=concurrency,
                progress=False,
            )  # fmt: skip
            played.append(sorted((r.example, r.total, r.metrics.get("turns"))
                                 for r in evaluation.results))  # fmt: skip
    assert played[0] == played[1]
    assert len({total for _, total, _ in played[0]}) > 1


class Stuck(RandomPolicy):
    """Never answers; says how many times it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Semaphore(0)

    async def act(self, messages: Sequence[Message], tools: Any = None) -> AssistantMessage:
        self.asked.release()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_an_interrupted_evaluation_aborts_the_episodes_it_left_open(app: ASGIApp) -> None:
    stuck = Stuck()
    async with asgi_client(app) as wander:
        running = asyncio.create_task(evaluate(
            wander, "tictactoe", stuck, examples=5, rollouts=2, concurrency=4, progress=False
        ))  # fmt: skip
        for _ in range(4):
            await asyncio.wait_for(stuck.asked.acquire(), 30)
        assert await live_episodes(app) == 4
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert await live_episodes(app) == 0


async def test_results_are_saved_and_plotted(app: ASGIApp, tmp_path: Path) -> None:
    async with asgi_client(app) as wander:
        evaluation = await evaluate(
            wander, "tictactoe", RandomPolicy(seed=3), examples=4, progress=False
        )
    evaluation.save_jsonl(tmp_path / "out.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert all(set(line) == {"episode_id", "example", "total", "components", "metrics"}
               for line in lines)  # fmt: skip
    plot(evaluation, tmp_path / "out.png")
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_clients_solver_agrees_with_the_environment() -> None:
    boards = positions("X")
    assert len(boards) > 2000
    for board in boards:
        assert set(best_moves(board)) == set(optimal_moves(board, "X")), board


def test_the_baseline_reads_the_board_the_environment_draws() -> None:
    env, config = TicTacToe(), TicTacToeConfig()
    for example in range(10):
        seed = example_seed(env.name, "train", 0, example)
        state, messages = env.reset(config, env.examples(config, "train")[example], seed)
        assert read_board([Message.model_validate(m) for m in messages]) == state["board"]
    with pytest.raises(NotATicTacToePrompt):
        read_board([Message(role="user", content="What is 2 + 2?")])


def user(board: str) -> list[Message]:
    """The user message the environment would send for ``board``."""
    return [Message(role="user", content=render_board(board) + "\n\nYour turn.")]


WIN = (
    "<think>Available: 2, 5, 6, 7, 8. Cell 2 completes a line of X: I win.</think>\n<move>2</move>"
)
BLOCK = (
    "<think>Available: 1, 2, 3, 5, 6, 8. O would complete a line at 1, so I block it.</think>\n"
    "<move>1</move>"
)


async def test_the_baseline_explains_its_moves() -> None:
    policy = MinimaxPolicy(seed=0)
    win = (await policy.act(user("XX.OO...."))).content
    assert win == WIN
    block = (await policy.act(user("X...O..O."))).content
    assert block == BLOCK
    noisy = MinimaxPolicy(noise=1.0, seed=0)
    moves = {(await noisy.act(user("X...O...."))).content for _ in range(40)}
    assert len(moves) == 7  # every free cell, optimal or not


def against_random(moves: Callable[[str], Sequence[int]]) -> tuple[float, int]:
    """X playing one of ``moves(board)`` at random against an opponent playing at random,
    each starting half the games, by the environment's rules: X's exact chance of a win,
    and how many positions X meets."""
    met: set[str] = set()

    def chance(board: str, x_to_move: bool) -> float:
        if (result := winner(board)) is not None:
            return float(result == "X")
        if x_to_move:
            met.add(board)
            options = moves(board)
            return sum(chance(place(board, cell, "X"), False) for cell in options) / len(options)
        free = legal_moves(board)
        return sum(chance(place(board, cell, "O"), True) for cell in free) / len(free)

    return (chance(EMPTY_BOARD, True) + chance(EMPTY_BOARD, False)) / 2, len(met)


def test_the_baseline_can_settle_its_ties_for_wins() -> None:
    for board in positions("X"):
        assert likeliest_win(board) in optimal_moves(board, "X"), board
    seeds = [MinimaxPolicy(seed=seed, ties="wins") for seed in range(3)]
    assert len({policy.answer("X...O....") for policy in seeds}) == 1  # one answer a position
    any_tie, any_positions = against_random(lambda board: optimal_moves(board, "X"))
    wins, wins_positions = against_random(lambda board: [likeliest_win(board)])
    assert (round(any_tie, 3), any_positions) == (0.873, 3052)
    assert (round(wins, 3), wins_positions) == (0.956, 383)
    with pytest.raises(ValueError, match="ties"):
        MinimaxPolicy(ties="first")  # type: ignore[arg-type]


async def test_the_openai_policy_sends_what_openai_expects() -> None:
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {}})
        message = {"role": "assistant", "content": "<move>4</move>"}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": message}]})

    policy = OpenAIChatPolicy(
        "my-model",
        "http://llm.test/v1/",
        api_key="sk-test",
        sampling={"temperature": 0.7, "max_tokens": 64},
        transport=httpx.MockTransport(reply),
    )
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    answer = await policy.act([Message(role="user", content="hi")], tools)
    await policy.aclose()
    assert answer == AssistantMessage(content="<move>4</move>")
    assert len(seen) == 2  # the 429 was retried
    request = seen[-1]
    assert str(request.url) == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {
        "model": "my-model",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.7,
        "max_tokens": 64,
        "tools": tools,
    }


async def test_the_openai_policy_takes_a_message_as_servers_send_it() -> None:
    """OpenAI's and vLLM's messages hold more than an action (``refusal``, ``annotations``,
    ``audio``, ``reasoning_content``, an empty ``tool_calls``): the text and the calls
    are the action; a NUL a model sampled is sent as U+FFFD, which the service takes."""
    message = {
        "role": "assistant", "content": "<move>4</move>\0", "refusal": None,
        "annotations": [], "audio": None, "function_call": None, "tool_calls": [],
        "reasoning_content": None,
    }  # fmt: skip
    call = {"id": "c1", "type": "function", "index": 0,
            "function": {"name": "run_sql", "arguments": "{}"}}  # fmt: skip
    replies = iter([message, {**message, "content": None, "tool_calls": [call]}])

    def reply(request: httpx.Request) -> httpx.Response:
        choice = {"index": 0, "message": next(replies), "logprobs": None, "finish_reason": "stop"}
        return httpx.Response(200, json={"id": "x", "object": "chat.completion",
                                         "choices": [choice], "usage": {}})  # fmt: skip

    policy = endpoint(reply)
    said = await policy.act([Message(role="user", content="hi")])
    called = await policy.act([Message(role="user", content="hi")])
    await policy.aclose()
    assert said == AssistantMessage(content="<move>4</move>\ufffd")
    assert called.content is None and called.tool_calls is not None
    assert [c.function.name for c in called.tool_calls] == ["run_sql"]


def endpoint(reply: Callable[[httpx.Request], httpx.Response]) -> OpenAIChatPolicy:
    return OpenAIChatPolicy(
        "m", "http://llm.test/v1/", retry=NO_RETRY, transport=httpx.MockTransport(reply)
    )


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (refused, "cannot be reached: [Errno 111] Connection refused "
                  "(POST /chat/completions, tried once)"),
        (lambda r: httpx.Response(401, json={"error": {"message": "bad key", "code": "auth"}}),
         "answered 401: bad key"),
        (lambda r: httpx.Response(200, json={"choices": []}),
         "answered something other than a chat completion: '{\"choices\":[]}'"),
        (lambda r: httpx.Response(200, text="<html>"),
         "answered something other than a chat completion: '<html>'"),
    ],
)  # fmt: skip
async def test_the_openai_policy_names_its_endpoint_when_it_fails(
    reply: Callable[[httpx.Request], httpx.Response], problem: str
) -> None:
    policy = endpoint(reply)
    with pytest.raises(PolicyEndpointError) as failure:
        await policy.act([Message(role="user", content="hi")])
    await policy.aclose()
    assert str(failure.value) == f"the policy endpoint at http://llm.test/v1 {problem}"


async def test_an_unreachable_policy_is_not_the_services_error(app: ASGIApp) -> None:
    async with asgi_client(app) as wander:
        evaluation = await evaluate(
            wander, "tictactoe", endpoint(refused), examples=2, progress=False
        )
    assert evaluation.summary.errors == 2
    assert {r.error for r in evaluation.results} == {
        "PolicyEndpointError: the policy endpoint at http://llm.test/v1 cannot be reached: "
        "[Errno 111] Connection refused (POST /chat/completions, tried once)"
    }


@pytest.fixture(scope="module")
def baseline_server() -> Iterator[ServiceProcess]:
    process = ServiceProcess(
        {}, command=("policy", "serve", "--policy", "minimax", "--seed", "7"), health="/v1/models"
    ).start()
    yield process
    process.stop()


async def test_the_openai_policy_plays_through_the_baseline_server(
    live: ServiceProcess, baseline_server: ServiceProcess
) -> None:
    policy = OpenAIChatPolicy("minimax", f"{baseline_server.url}/v1")
    async with AsyncWanderClient(live.url) as wander:
        evaluation = await evaluate(
            wander, "tictactoe", policy, examples=6, rollouts=2, config=OPTIMAL, progress=False
        )
    await policy.aclose()
    assert evaluation.summary.errors == 0 and len(evaluation.results) == 12
    assert {r.metrics["outcome"] for r in evaluation.results} == {"draw"}
    assert evaluation.summary.components["format"].mean == 1.0


def test_the_baseline_server_refuses_other_prompts(baseline_server: ServiceProcess) -> None:
    body = {"model": "minimax", "messages": [{"role": "user", "content": "Tell me a joke"}]}
    response = httpx.post(f"{baseline_server.url}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def completion(server: ServiceProcess, content: str, **options: Any) -> httpx.Response:
    body = {"model": "minimax", "messages": [{"role": "user", "content": content}], **options}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return response


def test_the_baseline_server_streams_as_openai_does(baseline_server: ServiceProcess) -> None:
    """Server-sent events ending in [DONE]: what Verifiers' harnesses ask for."""
    board = render_board("XX.OO....") + "\n\nYour turn."
    options = {"stream": True, "stream_options": {"include_usage": True}}
    response = completion(baseline_server, board, **options)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert {(c["object"], c["id"], c["model"]) for c in chunks} == {
        ("chat.completion.chunk", chunks[0]["id"], "minimax")
    }
    choices = [choice for chunk in chunks for choice in chunk["choices"]]
    assert choices == [
        {"index": 0, "delta": {"role": "assistant", "content": WIN}, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": "stop"},
    ]
    assert chunks[-1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    unasked = completion(baseline_server, board, stream=True).text.split("\n\n")
    assert len(unasked) == 4 and "usage" not in unasked[1]  # two chunks, [DONE], ""
    plain = completion(baseline_server, board).json()
    assert plain["choices"][0]["message"] == {"role": "assistant", "content": WIN}


def test_the_baseline_server_reads_observations_wrapped_in_json(
    baseline_server: ServiceProcess,
) -> None:
    """As Verifiers' OpenEnvTaskset sends them: the prompt, or else the last message."""
    board = render_board("X...O..O.") + "\n\nYour turn."
    schema = {"title": "WanderAction", "required": ["content"], "type": "object"}
    by_prompt = {"prompt": board, "messages": [{"role": "user", "content": "stale"}]}
    by_messages = {"messages": [{"role": "user", "content": board}], "metadata": {"turn": 2}}
    for observation in (by_prompt, by_messages):
        wrapped = json.dumps({"observation": observation, "action_schema": schema})
        assert "\\n" in wrapped  # the board's newlines arrive escaped
        answer = completion(baseline_server, wrapped).json()["choices"][0]["message"]
        assert answer["content"] == BLOCK
    unwrapped = json.dumps({"observation": {"prompt": board}})  # not OpenEnvTaskset's shape
    body = {"model": "minimax", "messages": [{"role": "user", "content": unwrapped}]}
    assert httpx.post(f"{baseline_server.url}/v1/chat/completions", json=body).status_code == 400


def test_wander_eval_prints_the_table_and_saves(live: ServiceProcess, tmp_path: Path) -> None:
    args = ["eval", "tictactoe", "--policy", "minimax", "-n", "5", "-r", "2", "--seed", "1",
            "--config", json.dumps(OPTIMAL), "--url", live.url, "--run", "cli-eval",
            "--output", str(tmp_path / "r.jsonl"), "--plot", str(tmp_path / "r.png")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "10 episodes scored, 0 errors" in result.output
    assert "outcome = draw" in result.output and "100.0%" in result.output
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 10
    assert (tmp_path / "r.png").exists()


def test_wander_eval_latest_turn_plays_whole_games_from_their_latest_message(
    live: ServiceProcess,
) -> None:
    args = ["eval", "tictactoe", "--policy", "minimax", "-n", "4", "--seed", "1", "--latest-turn",
            "--config", json.dumps(OPTIMAL), "--url", live.url, "--run", "cli-latest"]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "4 episodes scored, 0 errors" in result.output
    assert "outcome = draw" in result.output and "100.0%" in result.output


def test_wander_eval_minimax_can_settle_its_ties_for_wins(
    live: ServiceProcess, tmp_path: Path
) -> None:
    random_opponent = {"min_random_move_prob": 1.0, "max_random_move_prob": 1.0}
    args = ["eval", "tictactoe", "--policy", "minimax", "--ties", "wins", "-n", "12",
            "--seed", "1", "--config", json.dumps(random_opponent), "--url", live.url,
            "--run", "cli-ties", "--output", str(tmp_path / "r.jsonl")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    outcomes = {json.loads(line)["metrics"]["outcome"] for line in lines}
    assert len(lines) == 12 and outcomes <= {"win", "draw"}
    unknown = CliRunner().invoke(cli, [*args[:4], "--ties", "first", "--url", live.url])
    assert unknown.exit_code == 2 and "--ties" in unknown.output


def test_wander_eval_explains_bad_options(live: ServiceProcess) -> None:
    runner = CliRunner()
    no_model = runner.invoke(cli, ["eval", "tictactoe", "--url", live.url])
    assert no_model.exit_code == 2 and "--model" in no_model.output
    bad = runner.invoke(cli, ["eval", "tictactoe", "--policy", "random", "--config", "{x"])
    assert bad.exit_code == 2 and "not JSON" in bad.output
    unknown = runner.invoke(cli, ["eval", "chess", "--policy", "random", "--url", live.url])
    assert unknown.exit_code == 2 and "env_not_found" in unknown.output


def test_wander_play_lets_a_person_play(live: ServiceProcess) -> None:
    moves = "".join(f"{cell}\n" for cell in [4, 0, 2, 6, 8, 1, 3, 5, 7] * 2)
    result = CliRunner().invoke(
        cli, ["play", "--example", "0", "--url", live.url, "--config", json.dumps(OPTIMAL)],
        input=moves,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Your move" in result.output and "Game over." in result.output
    assert "Total reward" in result.output


def episodes_created(url: str) -> float:
    """The service's count of episodes created so far, from its metrics."""
    lines = httpx.get(f"{url}/metrics").text.splitlines()
    return sum(float(line.split()[-1]) for line in lines
               if line.startswith("wander_episodes_created_total{"))  # fmt: skip


def test_wander_eval_checks_for_matplotlib_before_playing(
    live: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    before = episodes_created(live.url)
    args = ["eval", "tictactoe", "--policy", "random", "-n", "2", "--url", live.url,
            "--plot", str(tmp_path / "r.png")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert f"plots need matplotlib: {install_command('plot')}" in result.output
    assert episodes_created(live.url) == before
    assert list(tmp_path.iterdir()) == []


def test_wander_eval_fails_when_the_policy_endpoint_is_unreachable(
    live: ServiceProcess, tmp_path: Path
) -> None:
    policy = f"http://127.0.0.1:{free_port()}/v1"
    args = ["eval", "tictactoe", "--model", "m", "--base-url", policy, "-n", "3",
            "--url", live.url, "--output", str(tmp_path / "r.jsonl")]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "0 episodes scored, 3 errors" in " ".join(result.output.split())  # a wrapped title
    last = result.output.splitlines()[-1]
    assert last.startswith(
        "Error: 3 of 3 episodes failed; the first error: PolicyEndpointError: "
        f"the policy endpoint at {policy} cannot be reached: Connection refused"
    ), last
    assert "Wander service" not in result.output
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert [json.loads(line)["error"].split(":")[0] for line in lines] == [
        "PolicyEndpointError"
    ] * 3


def test_wander_eval_refuses_a_baseline_where_it_cannot_play(live: ServiceProcess) -> None:
    before = episodes_created(live.url)
    args = ["eval", "reverse_text", "--policy", "minimax", "--url", live.url]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "MinimaxPolicy cannot play 'reverse_text'" in " ".join(result.output.split())
    assert episodes_created(live.url) == before


def test_wander_eval_interrupted_by_sigterm_aborts_its_episodes(live: ServiceProcess) -> None:
    """SIGTERM while four episodes wait on a policy endpoint that never answers: each is
    aborted (none is left live), one line says so, status 130, no traceback."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        before = live_count(live.url)
        command = [sys.executable, "-m", "wander", "eval", "tictactoe", "--model", "m",
                   "--base-url", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "-n", "6",
                   "-c", "4", "--url", live.url, "--run", "interrupted"]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "k"}
        evaluation = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: live_count(live.url) == before + 4, "no four episodes", 30)
            evaluation.send_signal(signal.SIGTERM)
            _, stderr = evaluation.communicate(timeout=30)
        finally:
            evaluation.kill()
    finally:
        silent.close()
    assert evaluation.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        "Interrupted: the episodes it had open were aborted."
    )
    assert "Traceback" not in stderr
    assert live_count(live.url) == before


def live_count(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "wander_live_episodes"
    )


def test_wander_eval_reports_a_partial_failure_and_fails(
    live: ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation whose episodes did not all score shows what did, and exits 1."""
    monkeypatch.setattr("wander.commands.client.make_policy", lambda *a, **k: Flaky())
    args = ["eval", "tictactoe", "-n", "3", "-c", "1", "--url", live.url]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "2 episodes scored, 1 errors" in " ".join(result.output.split())
    assert "1 of 3 episodes failed; the first error: RuntimeError: model server fell over" in (
        result.output
    )
