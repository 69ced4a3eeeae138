"""The OpenAPI 3.1 description of `duckscore serve`, generated: the request tables' rows from the
table contracts the server checks them with (serve/tables.py: the retrieval log's columns for
POST /v1/score, seed 001's tables for POST /v1/answers), a contract line from the score and
answers contracts' own JSON Schemas. It describes the loaded policy's requests (a recipe's
declared sources, the answer policy's rerank score range), so a reload may change it."""

from __future__ import annotations

import json
from typing import Any

from ..core.resources import contract_schema
from .tables import RequestTable

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "One line, no traceback."}},
}
_VERSION_HEADER = {
    "X-Duckscore-Policy-Version": {
        "description": "score_policy_version of the policy that answered.",
        "schema": {"type": "string"},
    }
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": _VERSION_HEADER,
        "content": {"application/json": {"schema": schema}},
    }


def _error(description: str) -> dict[str, Any]:
    return _json({"$ref": "#/components/schemas/Error"}, description)


def _contract_line(capability: str = "score") -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(contract_schema(capability).read_text(encoding="utf-8"))
    for key in ("$schema", "$id"):  # a component, not a document of its own
        schema.pop(key, None)
    return schema


def openapi_schema(
    version: str, hits: RequestTable, answers: dict[str, RequestTable]
) -> dict[str, Any]:
    """The document `GET /openapi.json` returns; `version` is duckscore's; `hits` and `answers`
    are the request tables the server reads (tables.hits_table, tables.answer_tables)."""
    policy = {
        "type": "object",
        "required": [
            "policy_version",
            "parameters_sha256",
            "recipe_id",
            "recipe_parameters_sha256",
            "per_query",
            "cross_query",
        ],
        "properties": {
            "policy_version": {"type": "string"},
            "parameters_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "recipe_id": {"type": "string"},
            "recipe_parameters_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "per_query": {
                "type": "boolean",
                "description": "Every number of a query depends on its own hits only, so "
                "requests waiting together are scored in one statement (docs/live.md).",
            },
            "cross_query": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Why a query's numbers may depend on the other queries scored "
                "with it (empty when per_query).",
            },
        },
    }
    rows = {"hits": ("Hit", hits)} | {
        name: (name.title().rstrip("s") + "Row", table) for name, table in answers.items()
    }
    schemas: dict[str, Any] = {component: table.row_schema() for component, table in rows.values()}
    lists = {
        name: table.list_schema(f"#/components/schemas/{component}")
        for name, (component, table) in rows.items()
    }
    required_answers = [name for name in answers if name != "events"]
    schemas |= {
        "ScoreRequest": {
            "type": "object",
            "required": ["hits"],
            "properties": {"hits": lists["hits"]},
        },
        "ContractLine": _contract_line(),
        "ScoreResponse": {
            "type": "object",
            "required": ["contract", "policy_version", "recipe_id"],
            "properties": {
                "contract": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/ContractLine"},
                },
                "policy_version": {"type": "string"},
                "recipe_id": {"type": "string"},
            },
        },
        "AnswersRequest": {
            "type": "object",
            "description": "The tables of `duckscore answers` (docs/answers.md), a list of row "
            "objects each; `events` is optional (absent or null: no events table).",
            "required": required_answers,
            "properties": {name: lists[name] for name in answers},
        },
        "AnswerContractLine": _contract_line("answers"),
        "AnswersResponse": {
            "type": "object",
            "required": ["contract", "policy_version"],
            "properties": {
                "contract": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/AnswerContractLine"},
                },
                "policy_version": {"type": "string"},
            },
        },
        "Health": {
            "type": "object",
            "required": ["status", "policy_version"],
            "properties": {"status": {"const": "ok"}, "policy_version": {"type": "string"}},
        },
        "Policy": policy,
        "Error": _ERROR,
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "duckscore serve",
            "version": version,
            "description": "Confidence decisions of a duckscore score policy on the hits of "
            "one or many queries: the lines `duckscore run` writes to contract.jsonl. The "
            "request tables are the table contracts the server checks them with.",
        },
        "paths": {
            "/v1/score": {
                "post": {
                    "operationId": "score",
                    "summary": "The contract lines of the queries in `hits`, by query_id.",
                    "requestBody": _body("ScoreRequest"),
                    "responses": {
                        "200": _json(_ref("ScoreResponse"), "The decisions."),
                        "400": _error("The body is not JSON, or `hits` is not a list of objects."),
                        "413": _error("The body is over the server's --max-body-bytes."),
                        "422": _error(
                            "The hits fail the retrieval log's checks: the row and the column "
                            "named in one line."
                        ),
                        "500": _error("An internal error (logged by the server)."),
                    },
                }
            },
            "/v1/answers": {
                "post": {
                    "operationId": "answers",
                    "summary": "Seed 001's answer confidence of the logged answers: the lines "
                    "`duckscore answers` writes to contract.jsonl, by answer_id.",
                    "requestBody": _body("AnswersRequest"),
                    "responses": {
                        "200": _json(_ref("AnswersResponse"), "The decisions."),
                        "400": _error("The body is not JSON, or a table is not a list of objects."),
                        "413": _error("The body is over the server's --max-body-bytes."),
                        "422": _error("The tables fail the answers' checks (docs/answers.md)."),
                        "500": _error("An internal error (logged by the server)."),
                    },
                }
            },
            "/v1/policy": {
                "get": {
                    "operationId": "policy",
                    "summary": "The loaded policy and recipe.",
                    "responses": {"200": _json(_ref("Policy"), "Loaded.")},
                }
            },
            "/v1/reload": {
                "post": {
                    "operationId": "reload",
                    "summary": "Re-read the policy and recipe from disk; swap them in atomically.",
                    "responses": {
                        "200": _json(_ref("Policy"), "Now loaded."),
                        "422": _error("The files no longer load; the old policy stays."),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "health",
                    "summary": "Liveness, with the loaded policy's version.",
                    "responses": {"200": _json(_ref("Health"), "Serving.")},
                }
            },
        },
        "components": {"schemas": schemas},
    }


def _ref(component: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{component}"}


def _body(component: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(component)}}}
