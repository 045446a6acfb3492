"""Every Python example of docs/client.md runs against a live server (each on a fresh
database of its own, so the examples' key names need not be unique)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

from tests.conftest import start_temporalstore

DOC = Path(__file__).resolve().parent.parent / "docs" / "client.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_example_runs(code: str) -> None:
    p = start_temporalstore()
    try:
        assert "port=6379" in code
        exec(compile(code.replace("port=6379", f"port={p.port}"), str(DOC), "exec"), {})
        assert redis.Redis(port=p.port).dbsize() > 0  # the example did write
    finally:
        p.stop()
