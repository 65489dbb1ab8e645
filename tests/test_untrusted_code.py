"""Model text never runs code in the service (issue #20: remote code execution).

Eight reasoning-gym scorers hand the answer to ``eval`` or sympy's ``parse_expr``. The
answer still reaches them, but in a confined worker (``service/sandbox``): as
``nobody``, with no network, no process creation and no writable file. These payloads
ran as root in the service before, and wrote the files this test looks for.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers import create

EVALUATING = (
    "spiral_matrix", "string_insertion", "binary_matrix", "n_queens",
    "polynomial_multiplication", "puzzle24", "countdown", "simple_integration",
)  # fmt: skip
"""The rg datasets whose scorer evaluates the answer as Python (grep eval/parse_expr)."""


def payloads(owned: Path, shared: Path) -> dict[str, str]:
    """Name -> an answer that leaves a file behind if it runs. ``owned`` is the test's
    own directory (root's, mode 0700); ``shared`` anyone may write in, so only the
    refusal to start a process keeps ``touch`` from leaving its file there."""
    return {
        "write": f"open({str(owned / 'written')!r}, 'w').write('pwned')",
        "process": f"__import__('subprocess').check_output(['touch', {str(shared / 'touched')!r}])",
        "id": "__import__('subprocess').check_output(['id'])",
        "os_write": f"__import__('os').system('id > {shared / 'system'}')",
    }


@pytest.mark.parametrize("dataset", EVALUATING)
async def test_an_answer_never_runs_as_code(
    api: httpx.AsyncClient, tmp_path: Path, dataset: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # past the umask: a process of any user could write here
    for name, payload in payloads(tmp_path, shared).items():
        [episode] = await create(api, env=f"rg/{dataset}", example=0)
        response = await api.post(
            f"/v1/episodes/{episode['id']}/step", json={"action": f"<answer>{payload}</answer>"}
        )
        assert response.status_code == 200, (name, response.text)
        assert "uid=" not in response.text
        assert response.json()["done"] is True
        record = await api.get(f"/v1/episodes/{episode['id']}")
        assert record.status_code == 200 and "uid=" not in record.text
    markers = [tmp_path / "written", shared / "touched", shared / "system"]
    left = [marker.name for marker in markers if marker.exists()]
    assert left == [], f"the answers to rg/{dataset} ran as code: they wrote {left}"
