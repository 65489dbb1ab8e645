"""A model's answer never runs as code (service/envs/rg_scoring, service/envs/guard.py).

Eleven reasoning-gym scorers ``eval`` text or hand it to sympy's ``parse_expr``; Wander
scores those datasets with parsers of its own. The answers below ran inside the worker
before: they wrote files, forged the worker's reply (a reward of a billion), leaked the
hidden answer through an exception's class name, and earned partial credit for naming
the scorer's variable (``oracle_answer``). Now each is a wrong answer: the same reward
as any other wrong answer, no file, no hidden answer in any response.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers import IN_THE_SHARED_LOOP, create
from tests.test_no_evaluation import EVALUATING_DATASETS

SHARED_SERVICE = True
pytestmark = IN_THE_SHARED_LOOP

STORE_KINDS = ("memory",)
"""What an answer does is the worker's business: one store is enough."""
FORGE = (
    "[f for f in [__import__('sys')._getframe()] for _ in range(99) "
    "if (f := f.f_back) and f.f_code.co_name == 'serve'] and "
    "__import__('os').write(1, bytes([102, 111, 114, 103, 101, 100]))"
)
"""Walks up to the worker's ``serve`` frame, as the forged-reward attack did, and writes
"forged" where the reply goes (spelled in numbers: the answer's text is echoed back)."""


def payloads(owned: Path, shared: Path) -> dict[str, str]:
    """Name -> an answer that leaves a file behind, or gains, if it runs. ``owned`` is the
    test's own directory (root's, mode 0700); ``shared`` anyone may write in."""
    return {
        "write": f"open({str(owned / 'written')!r}, 'w').write('pwned')",
        "process": f"__import__('subprocess').check_output(['touch', {str(shared / 'touched')!r}])",
        "id": "__import__('subprocess').check_output(['id'])",
        "os_write": f"__import__('os').system('id > {shared / 'system'}')",
        "forge": FORGE,
        "oracle_answer": "oracle_answer",
        "oracle_answer.split()": "oracle_answer.split()",
        "list(oracle_answer)": "list(oracle_answer)",
        "leak": "(_ for _ in ()).throw(type(str(oracle_answer), (Exception,), {}))",
        "entry": "entry['answer']",
    }


async def reward(api: httpx.AsyncClient, dataset: str, answer: str) -> tuple[float, str]:
    """The reward of ``answer`` to example 0, and every response's text."""
    [episode] = await create(api, env=f"rg/{dataset}", example=0)
    response = await api.post(
        f"/v1/episodes/{episode['id']}/step", json={"action": f"<answer>{answer}</answer>"}
    )
    assert response.status_code == 200, (answer, response.text)
    assert response.json()["done"] is True
    record = await api.get(f"/v1/episodes/{episode['id']}")
    assert record.status_code == 200
    return response.json()["reward"], response.text + record.text


@pytest.mark.parametrize("dataset", sorted(EVALUATING_DATASETS))
async def test_an_answer_never_runs_as_code(
    api: httpx.AsyncClient, tmp_path: Path, dataset: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # past the umask: a process of any user could write here
    wrong, _ = await reward(api, dataset, "no idea")
    for name, payload in payloads(tmp_path, shared).items():
        gained, text = await reward(api, dataset, payload)
        assert gained == wrong, f"{name} scored {gained} on rg/{dataset}, a wrong answer {wrong}"
        for marker in ("uid=", "forged"):
            at = text.find(marker)
            assert at < 0, (name, text[max(0, at - 200) : at + 50])
    markers = [tmp_path / "written", shared / "touched", shared / "system"]
    left = [marker.name for marker in markers if marker.exists()]
    assert left == [], f"the answers to rg/{dataset} ran as code: they wrote {left}"
