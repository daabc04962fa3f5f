"""The API's OpenAPI 3.1 document said in OpenAPI 3.0, for the Swagger UI the site serves
offline (the swagger-ui-bundle package ships 4.15, which renders 3.0 only and answers 3.1 with
"Unable to render this definition"). ``/openapi.json`` stays 3.1; ``/docs`` reads this form.

The 3.1 forms FastAPI and pydantic write are rewritten: a ``{"type": "null"}`` branch of
``anyOf``/``oneOf`` becomes ``nullable``, ``const`` an ``enum`` of one, a list of
``examples`` in a schema its first as ``example``, numeric ``exclusiveMinimum``/``Maximum``
the 3.0 boolean form, a list of types one type with ``nullable``."""

from __future__ import annotations

import copy
from typing import Any

VERSION = "3.0.3"
_NOT_SCHEMAS = {"examples", "example", "properties", "enum", "const", "default", "required"}


def _schema(node: dict[str, Any]) -> dict[str, Any]:
    for key in ("anyOf", "oneOf"):
        if key in node:
            branches = node[key]
            others = [b for b in branches if b != {"type": "null"}]
            if len(others) < len(branches):
                node["nullable"] = True
                if len(others) == 1:
                    del node[key]
                    if "$ref" in others[0]:  # 3.0: siblings of $ref are ignored
                        node["allOf"] = [others[0]]
                    else:
                        node.update({k: v for k, v in others[0].items() if k not in node})
                else:
                    node[key] = others
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if isinstance(node.get("examples"), list):
        examples = node.pop("examples")
        if examples:
            node.setdefault("example", examples[0])
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(bound), int | float) and not isinstance(node.get(bound), bool):
            node[plain] = node[bound]
            node[bound] = True
    if isinstance(node.get("type"), list):
        types = [t for t in node["type"] if t != "null"]
        node["nullable"] = node.get("nullable", False) or len(types) < len(node["type"])
        node["type"] = types[0] if types else "string"
    return node


def _walk(node: Any, in_schema: bool) -> Any:
    if isinstance(node, list):
        return [_walk(item, in_schema) for item in node]
    if not isinstance(node, dict):
        return node
    if in_schema:
        node = _schema(node)
    out = {}
    for key, value in node.items():
        if key == "schema":
            out[key] = _walk(value, True)
        elif key == "schemas" or (in_schema and key == "properties"):
            out[key] = {k: _walk(v, True) for k, v in value.items()}
        elif in_schema and key in ("items", "additionalProperties", "not"):
            out[key] = _walk(value, True)
        elif in_schema and key in ("anyOf", "oneOf", "allOf"):
            out[key] = [_walk(v, True) for v in value]
        elif in_schema and key in _NOT_SCHEMAS:
            out[key] = value
        else:
            out[key] = _walk(value, False)
    return out


def downgrade(document: dict[str, Any]) -> dict[str, Any]:
    """A 3.0 copy of the 3.1 ``document`` (the original is left as it is)."""
    out = _walk(copy.deepcopy(document), False)
    out["openapi"] = VERSION
    out.pop("webhooks", None)
    out.pop("jsonSchemaDialect", None)
    info = out.get("info", {})
    info.pop("summary", None)  # 3.1 only
    if "license" in info:
        info["license"].pop("identifier", None)
    return out
