"""Screenshots of every page of the web console, at desktop and phone width (`make
screenshots`): docs/img/console-<page>-<desktop|phone>.png, shown in the README.

It serves Wander on a free port with a SQLite archive in a temporary folder, plays a
run of tic-tac-toe with the minimax baseline (and one game with an invalid move), a
reverse_text and a sql episode, then photographs the pages in Debian's chromium driven
by Playwright (nothing downloaded), and keeps them small (128 colours). Usage:
python tools/screenshots.py [FOLDER].
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from wander.client import WanderClient
from wander.client.models import AssistantMessage
from wander.client.policies.tictactoe import MinimaxPolicy
from wander.service.archive.migrations import upgrade
from wander.testing import ServiceProcess

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
RUN = "demo"


def play_run(client: WanderClient) -> str:
    """40 games of a minimax with 30% random moves, and one with an invalid move (its id)."""
    policy = MinimaxPolicy(noise=0.3, seed=7)
    for example in range(40):
        [game] = client.create("tictactoe", example=example, run=RUN)
        while not game.done:
            game.step(policy.answer(game.info["board"]))
    [game] = client.create("tictactoe", example=41, seed=3, run=RUN)
    answer = policy.answer(game.info["board"])
    game.step(answer)
    if not game.done:
        game.step(answer)  # the same cell again: an invalid move
    while not game.done:
        game.step(policy.answer(game.info["board"]))
    return game.id


def reverse_text(client: WanderClient) -> str:
    [episode] = client.create("reverse_text", example=2, run="generic")
    text = episode.info["text"]
    answer = text[::-1].replace("e", "a", 3)  # a few slips
    episode.step(f"<think>Read it backwards.</think><reversed_text>{answer}</reversed_text>")
    return episode.id


def sql(client: WanderClient) -> str:
    [episode] = client.create("sql", example=1, run="generic")
    calls = [("list_tables", {}), ("run_sql", {"query": "SELECT COUNT(*) FROM customers"})]
    for number, (name, arguments) in enumerate(calls):
        call = {"id": f"call_{number}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        episode.step(AssistantMessage.model_validate({"content": None, "tool_calls": [call]}))
    episode.step("<answer>42</answer>")
    return episode.id


def busy(url: str, stop: threading.Event) -> None:
    """Games played while the Live page watches."""
    policy = MinimaxPolicy(noise=0.5, seed=1)
    with WanderClient(url) as client:
        while not stop.is_set():
            [game] = client.create("tictactoe")
            while not game.done:
                game.step(policy.answer(game.info["board"]))


def shoot(browser: Any, url: str, folder: Path, ids: dict[str, str]) -> None:
    pages = {
        "runs": ("#/runs", "table.runs"),
        "run": (f"#/run/{RUN}", "svg.chart"),
        "episode": (f"#/episode/{ids['tictactoe']}?run={RUN}", "main .board"),
        "reverse-text": (f"#/episode/{ids['reverse_text']}?run=generic", ".columns"),
        "sql": (f"#/episode/{ids['sql']}?run=generic", ".queries"),
        "play": ("#/play", "form.setup"),
        "live": ("#/live", "[data-field=steps-rate]"),
    }
    for size, (width, height) in VIEWPORTS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        for name, (hash_, ready) in pages.items():
            page.goto(f"{url}/console/{hash_}")
            page.wait_for_selector(ready)
            if name == "episode":
                page.keyboard.press("Home")
                for _ in range(3):
                    page.keyboard.press("ArrowRight")
            elif name == "play":
                page.fill("input[name=seed]", "4")
                page.get_by_role("button", name="Start").click()
                page.locator(".game .board button:enabled").nth(2).click()
                page.wait_for_selector(".game .message.assistant")
            elif name == "live":
                page.wait_for_timeout(4500)
            whole = name == "run"  # its chart is below the fold
            small(page.screenshot(full_page=whole), folder / f"console-{name}-{size}.png")
        context.close()


def small(png: bytes, path: Path) -> None:
    """The screenshot in 128 colours, undithered: a third of the bytes, and a page of flat
    colours and text looks the same. (Pillow comes with the dev extra's matplotlib.)"""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=128, dither=Image.Dither.NONE).save(path, optimize=True)


def main(folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("no chromium: apt-get install chromium")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        database = f"sqlite:///{home}/archive.db"
        upgrade(database)
        service = ServiceProcess({"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""})
        service.start()
        stop = threading.Event()
        worker = threading.Thread(target=busy, args=(service.url, stop))
        try:
            with WanderClient(service.url) as client:
                ids = {"tictactoe": play_run(client), "reverse_text": reverse_text(client),
                       "sql": sql(client)}  # fmt: skip
            worker.start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium)
                shoot(browser, service.url, folder, ids)
                browser.close()
        finally:
            stop.set()
            if worker.is_alive():
                worker.join()  # its game ends before the service does
            service.stop()
    print(f"screenshots in {folder}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
