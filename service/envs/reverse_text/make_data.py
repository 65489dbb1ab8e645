"""Regenerates ``paragraphs.jsonl``: prose paragraphs from the docstrings of Python's
standard library (PSF License Version 2, which allows redistribution with the
notice kept: see ``SOURCE.md``).

    python -m service.envs.reverse_text.make_data

Run it once; the output is committed, so nothing is generated or downloaded at
run time. The result depends on the Python version that runs it (3.11 made the
shipped file).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

OUTPUT = Path(__file__).with_name("paragraphs.jsonl")
SKIP = re.compile(r"^(test|idlelib|tkinter|turtle|antigravity|this|lib2to3|ensurepip|venv|__)")
MIN_CHARS, MAX_CHARS = 120, 600


def docstrings() -> Iterator[str]:
    names = sorted(
        name
        for name in sys.stdlib_module_names
        if not SKIP.match(name) and not name.startswith("_")
    )
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except Exception:
            continue
        yield inspect.getdoc(module) or ""
        for _, member in sorted(inspect.getmembers(module), key=lambda item: item[0]):
            if getattr(member, "__module__", None) != name:
                continue
            if inspect.isfunction(member):
                yield inspect.getdoc(member) or ""
            elif inspect.isclass(member):
                yield inspect.getdoc(member) or ""
                for attribute in sorted(vars(member)):
                    method = vars(member)[attribute]
                    if inspect.isfunction(method):
                        yield inspect.getdoc(method) or ""


def prose(paragraph: str) -> str | None:
    """The paragraph on one line if it reads as prose, else None."""
    lines = paragraph.splitlines()
    if any(line.startswith((" ", ">>>", "-", "*", "|")) or line[-1:] == ":" for line in lines):
        return None
    text = re.sub(r"\s+", " ", " ".join(line.strip() for line in lines))
    letters = sum(char.isalpha() or char in " ,.'" for char in text)
    if not MIN_CHARS <= len(text) <= MAX_CHARS or letters / len(text) < 0.92:
        return None
    if not text[0].isupper() or not text.endswith("."):
        return None
    return text


def main() -> None:
    seen: set[str] = set()
    paragraphs = []
    for doc in docstrings():
        for block in re.split(r"\n\s*\n", doc):
            text = prose(block.strip())
            if text and text not in seen:
                seen.add(text)
                paragraphs.append(text)
    with OUTPUT.open("w", encoding="utf-8") as out:
        for text in paragraphs:
            out.write(json.dumps({"text": text}) + "\n")
    print(f"{len(paragraphs)} paragraphs -> {OUTPUT}")


if __name__ == "__main__":
    main()
