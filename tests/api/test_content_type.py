"""A JSON body is read as JSON whatever its Content-Type says (`curl -d` sends a form type)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from helpers import wait_job


def post(api: httpx.Client, path: str, body: Any, content_type: str | None) -> httpx.Response:
    headers = {"content-type": content_type} if content_type else {}
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    return api.post(path, content=data, headers=headers)


@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded",  # curl -d
    "text/plain; charset=utf-8",
    "application/octet-stream",
    None,
])
def test_a_json_body_is_read_whatever_the_declared_type(
    api: httpx.Client, user: str, content_type: str | None,
) -> None:
    saved = post(api, "/v1/memories?wait=20",
                 {"user_id": user, "content": "我对花生过敏 (peanuts)"}, content_type)
    assert saved.status_code == 201, saved.text
    accepted = post(api, "/v1/interactions", {
        "user_id": user, "extract": "raw",
        "messages": [{"role": "user", "content": "My daughter is called Mia"}],
    }, content_type)
    assert accepted.status_code == 202, accepted.text
    assert wait_job(api, accepted.json()["job_id"])["status"] == "succeeded"
    found = post(api, "/v1/search", {"user_id": user, "query": "花生", "top_k": 5}, content_type)
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["memory"]["content"] == "我对花生过敏 (peanuts)"


def test_bad_input_in_a_form_typed_body_still_names_the_field(api: httpx.Client, user: str) -> None:
    response = post(api, "/v1/search", {"user_id": user, "query": "x", "top_k": 0},
                    "application/x-www-form-urlencoded")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "top_k"


@pytest.mark.parametrize(("body", "content_type"), [
    (b"user_id=u1&query=tea", "application/x-www-form-urlencoded"),
    (b"--x\r\nContent-Disposition: form-data; name=\"user_id\"\r\n\r\nu1\r\n--x--\r\n",
     "multipart/form-data; boundary=x"),
])
def test_a_body_that_is_not_json_says_to_send_json(
    api: httpx.Client, body: bytes, content_type: str,
) -> None:
    response = post(api, "/v1/search", body, content_type)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "malformed_json"
    assert content_type.split(";")[0] in error["message"]
    assert "Content-Type: application/json" in error["message"]


def test_a_json_typed_body_that_is_not_json_is_malformed(api: httpx.Client) -> None:
    response = post(api, "/v1/search", b"{not json", "application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "malformed_json" and "sent as" not in error["message"]


def test_the_openapi_description_says_so(api: httpx.Client) -> None:
    assert "whatever `Content-Type` says" in api.get("/openapi.json").json()["info"]["description"]
