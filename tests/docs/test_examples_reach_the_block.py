"""Each example the documentation gives, posted as it is written (default extraction unless
the example names one), answers with its memory in the `/v1/context` block: the block is
all a model ever sees. The real e5 model, stack and HTTP.

README's curl session, the TypeScript snippets and the proxy's own example run by their
own clients too (tests/api/test_readme_examples.py, tests/clients/, tests/integrations/);
here every example's question meets the block the same way.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import wait_job

# (where the docs give it, what is posted, the question, what the block must hold, extract)
EXAMPLES = [
    ("README.md", "Remember that my daughter is called Mia. 我喜欢吃火锅", "孩子叫什么名字?",
     "Mia", None),
    ("docs/integrations.md MCP", "I moved to Berlin in March", "where do I live?", "Berlin",
     None),
    ("docs/integrations.md read-your-writes", "Remember that I moved to Berlin",
     "where do I live?", "Berlin", None),
    ("docs/usage.md", "I moved to Berlin", "where do I live?", "Berlin", None),
    ("clients/typescript/README.md", "I moved to Lyon last spring and I keep bees on my roof",
     "where do I live?", "Lyon", "raw"),
    ("docs/integrations.md TypeScript", "I'm vegetarian and I moved to Lyon last spring",
     "I'm looking for a vegetarian dinner in Lyon", "vegetarian", None),
    ("docs/integrations.md proxy", "I am allergic to peanuts", "Any snack ideas for my hike?",
     "peanuts", None),
]


def post(api: httpx.Client, user: str, content: str, extract: str | None) -> None:
    body: dict[str, Any] = {"user_id": user, "thread_id": "docs",
                            "messages": [{"role": "user", "content": content}]}
    if extract is not None:
        body["extract"] = extract
    response = api.post("/v1/interactions", json=body)
    assert response.status_code == 202, response.text
    assert wait_job(api, response.json()["job_id"])["status"] == "succeeded"


@pytest.mark.parametrize(("where", "said", "question", "expected", "extract"), EXAMPLES,
                         ids=[e[0] for e in EXAMPLES])
def test_the_example_memory_is_in_its_block(
    api: httpx.Client, user: str, where: str, said: str, question: str, expected: str,
    extract: str | None,
) -> None:
    post(api, user, said, extract)
    response = api.post("/v1/context", json={"user_id": user, "query": question})
    assert response.status_code == 200, response.text
    body = response.json()
    assert expected in body["block"], (where, body)
    assert any(expected in item["memory"]["content"] for item in body["items"]), where


def test_the_readme_example_at_its_budget(api: httpx.Client, user: str) -> None:
    """README asks with `token_budget` 300 and a top_k of 5 on search."""
    post(api, user, EXAMPLES[0][1], None)
    body = api.post("/v1/context", json={"user_id": user, "query": "孩子叫什么名字?",
                                         "token_budget": 300}).json()
    assert "Mia" in body["block"] and body["tokens"] <= 300
