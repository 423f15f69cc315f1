"""How the transport classifies Placement's error answers (no server needed:
the answers are the bodies Placement 16 sends)."""

from __future__ import annotations

import json

import pytest

from virtdriver.placement import transport
from virtdriver.placement.errors import GenerationConflict, PlacementError


class Answer:
    def __init__(self, status: int, detail: str, code: str | None = None):
        self.status_code = status
        self.text = json.dumps({"errors": [
            {"status": status, "title": "x", "detail": detail,
             "code": code or "placement.undefined_code"}]})

    def json(self):
        return json.loads(self.text)


RACE = ("The server has either erred or is incapable of performing the "
        "requested operation.\n\n Another thread concurrently updated the "
        "resource provider data. Please retry your update")


def test_the_trait_race_500_is_a_generation_conflict():
    error = transport.from_response("PUT", "/resource_providers/u/traits",
                                    Answer(500, RACE), "http://p")
    assert isinstance(error, GenerationConflict)
    assert "re-read it and retry" in str(error)


@pytest.mark.parametrize("method, path", [
    ("PUT", "/resource_providers/u/inventories"),
    ("POST", "/resource_providers"),
])
def test_other_500s_stay_server_errors(method, path):
    error = transport.from_response(method, path, Answer(500, RACE),
                                    "http://p")
    assert isinstance(error, PlacementError)
    assert not isinstance(error, GenerationConflict)
