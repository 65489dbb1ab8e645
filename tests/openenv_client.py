"""An OpenEnv client playing Wander, run by tests/test_openenv_interop.py with the python
of a venv holding the real ``openenv`` package (0.10, or 0.4.1 as Verifiers pins it).

Only the standard library and ``openenv`` here: this runs outside the project's venv.
``python tests/openenv_client.py TASKS_JSON`` runs each task of the list in turn and
prints one JSON line per task; the test asserts on them. Importing openenv takes
seconds, so one process runs every task. The ``drop`` task stops half-way: it prints a
line, waits for a line on stdin (the test kills the first service meanwhile), then
finishes the game through the second service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from openenv.core import GenericEnvClient  # pyright: ignore[reportMissingImports] (interop venv)

PREFERENCE = (4, 0, 2, 6, 8, 1, 3, 5, 7)
GAME_CONFIG = {"min_random_move_prob": 0.5, "max_random_move_prob": 0.5, "max_turns": 12}


def move(board: str, turn: int) -> str:
    """Deterministic in the board; every third turn starts with an invalid move attempt
    (an occupied cell, or cell 9), so invalid moves and their penalty are played too."""
    if turn % 3 == 2:
        taken = [cell for cell in PREFERENCE if board[cell] != "."]
        return f"<think>try</think><move>{taken[0] if taken else 9}</move>"
    cell = next(cell for cell in PREFERENCE if board[cell] == ".")
    return f"<think>cell {cell}</think><move>{cell}</move>"


def step_record(result: Any) -> dict[str, Any]:
    return {"observation": result.observation, "reward": result.reward, "done": result.done,
            "metadata": result.metadata}  # fmt: skip


def play_sync(base: str, reset: dict[str, Any]) -> dict[str, Any]:
    """A whole game with the sync client; the actions it took, and what came back."""
    with GenericEnvClient(base_url=base).sync() as env:
        result = env.reset(**reset)
        episode_id = result.metadata["episode_id"]
        actions, steps = [], []
        while not result.done:
            action = {"content": move(result.observation["info"]["board"], len(actions))}
            result = env.step(action)
            actions.append(action)
            steps.append(step_record(result))
        state = env.state()
    return {"episode_id": episode_id, "actions": actions, "steps": steps, "state": state}


async def play_async(base: str, reset: dict[str, Any]) -> dict[str, Any]:
    """The same with the async client."""
    async with GenericEnvClient(base_url=base) as env:
        result = await env.reset(**reset)
        episode_id = result.metadata["episode_id"]
        actions, steps = [], []
        while not result.done:
            action = {"content": move(result.observation["info"]["board"], len(actions))}
            result = await env.step(action)
            actions.append(action)
            steps.append(step_record(result))
    return {"episode_id": episode_id, "actions": actions, "steps": steps}


def games(base: str, count: int) -> dict[str, Any]:
    played = []
    for example in range(count):
        reset = {"example": example, "seed": 100 + example, "config": GAME_CONFIG,
                 "run": "openenv-interop", "episode_id": f"game-{example}"}  # fmt: skip
        if example % 2:
            played.append(asyncio.run(play_async(base, reset)))
        else:
            played.append(play_sync(base, reset))
    return {"games": played}


def reverse_text(service: str) -> dict[str, Any]:
    with GenericEnvClient(base_url=f"{service}/openenv/reverse_text").sync() as env:
        opening = env.reset(example=0)
        text = opening.observation["messages"][-1]["content"]
        result = env.step({"content": f"<reversed_text>{text[::-1]}</reversed_text>"})
    return {"opening": step_record(opening), "steps": [step_record(result)]}


def sql(service: str) -> dict[str, Any]:
    with GenericEnvClient(base_url=f"{service}/openenv/sql").sync() as env:
        opening = env.reset(example=1)
        tools = env.step({"type": "list_tools"})
        calls = [
            env.step({"type": "call_tool", "tool_name": "list_tables", "arguments": {}}),
            env.step({"type": "call_tool", "tool_name": "run_sql",
                      "arguments": {"query": "SELECT COUNT(*) FROM customers"}}),
        ]  # fmt: skip
        answer = env.step({"content": "<answer>7</answer>"})
    steps = [step_record(result) for result in [*calls, answer]]
    return {"opening": step_record(opening), "tools": step_record(tools), "steps": steps}


def drop(first: str, second: str) -> dict[str, Any]:
    """The same game twice: uninterrupted on ``second``; then on ``first`` until the
    test kills it, and on to the end through ``second``, reattached by ``?episode_id=``
    on the client's base URL."""
    reset = {"example": 5, "seed": 42, "config": GAME_CONFIG}
    reference = play_sync(f"{second}/openenv/tictactoe", reset)
    actions = reference["actions"]
    env = GenericEnvClient(base_url=f"{first}/openenv/tictactoe").sync()
    env.connect()
    result = env.reset(**reset)
    episode_id = result.metadata["episode_id"]
    steps = [step_record(env.step(action)) for action in actions[:2]]
    print(json.dumps({"dropped": episode_id}), flush=True)
    sys.stdin.readline()  # the first service is killed meanwhile
    base = f"{second}/openenv/tictactoe?episode_id={episode_id}"
    with GenericEnvClient(base_url=base).sync() as resumed:
        steps += [step_record(resumed.step(action)) for action in actions[2:]]
    with contextlib.suppress(Exception):  # its server is gone: nothing to close
        env.close()
    return {"reference": reference, "episode_id": episode_id, "steps": steps}


def guess(base: str, reset: dict[str, Any], wrapped: bool) -> dict[str, Any]:
    """tests/openenv_envs.py's GuessNumber by halving, on OpenEnv's own server of it
    (``wrapped`` False: actions are GuessAction's fields) or hosted by Wander (True: the
    action is an assistant message whose content is that JSON)."""
    low, high, guesses, rewards = 1, 100, [], []
    with GenericEnvClient(base_url=base).sync() as env:
        result = env.reset(**reset)
        while not result.done:
            number = (low + high) // 2
            action = {"guess": number}
            result = env.step({"content": json.dumps(action)} if wrapped else action)
            observed = result.observation
            if wrapped:
                observed = json.loads(observed["messages"][-1]["content"])
            hint = observed["hint"]
            low, high = (number + 1, high) if "higher" in hint else (low, number - 1)
            guesses.append(number)
            rewards.append(result.reward)
    return {"guesses": guesses, "rewards": rewards, "metadata": result.metadata}


def actions(base: str, reset: dict[str, Any], taken: list[dict[str, Any]]) -> dict[str, Any]:
    """``taken``, one step each after a reset: the observations and rewards."""
    with GenericEnvClient(base_url=base).sync() as env:
        opening = env.reset(**reset)
        steps = [step_record(env.step(action)) for action in taken]
    return {"opening": step_record(opening), "steps": steps}


def validate(base: str) -> dict[str, Any]:
    """OpenEnv 0.10's own runtime check of a server (``openenv validate --url``)."""
    from openenv.cli._validation import (  # pyright: ignore[reportMissingImports]
        validate_running_environment,
    )

    return validate_running_environment(base)


TASKS = {"games": games, "reverse_text": reverse_text, "sql": sql, "drop": drop,
         "validate": validate, "guess": guess, "actions": actions}  # fmt: skip


def main() -> None:
    for name, *arguments in json.loads(sys.argv[1]):
        result = TASKS[name](*arguments)
        print(json.dumps({"task": name, "result": result}), flush=True)


if __name__ == "__main__":
    main()
