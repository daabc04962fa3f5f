"""The API's bodies against the types they mirror."""

from __future__ import annotations

import dataclasses

from fastapi.testclient import TestClient

from data.rules import RuleReport, check
from model.decoding.answer import report_json
from serve.schemas import FeedbackResponse


def test_a_rule_report_is_given_with_every_field_and_the_hard_verdict() -> None:
    for upper, lower in [("春风得意", "秋月生辉"), ("春风得意", "春风得意"), ("春风得意", "秋月")]:
        report = check(upper, lower)
        body = FeedbackResponse.model_validate({"id": 1, "kind": "own", "report": report_json(report)})
        dumped = body.model_dump(mode="json")
        assert list(dumped["report"].items()) == [*report.as_dict().items(), ("hard_ok", report.hard_ok)]


def test_the_openapi_schema_lists_every_rule(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    report = next(s for name, s in schemas.items() if name.startswith("RuleReportOut"))
    expected = [f.name for f in dataclasses.fields(RuleReport)] + ["hard_ok"]
    assert list(report["properties"]) == expected
    assert report["required"] == expected
