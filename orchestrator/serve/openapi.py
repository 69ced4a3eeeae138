"""The OpenAPI 3.1 description of `duckscore serve`, written by hand, so that clients in other
languages can generate code; a contract line is the score contract's own JSON Schema."""

from __future__ import annotations

import json
from typing import Any

from ..core.resources import contract_schema

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


def openapi_schema(version: str) -> dict[str, Any]:
    """The document `GET /openapi.json` returns; `version` is duckscore's."""
    hit = {
        "type": "object",
        "description": "One row of a retrieval log (docs/inputs.md): query_id, source, "
        "item_id, parent_id, score, and optionally rank and the other columns of the log.",
        "required": ["query_id", "source", "item_id", "score"],
        "properties": {
            "query_id": {"type": "string"},
            "source": {"type": "string"},
            "item_id": {"type": "string"},
            "parent_id": {"type": ["string", "null"]},
            "score": {"type": "number"},
            "rank": {"type": ["integer", "null"], "minimum": 1},
        },
        "additionalProperties": True,
    }
    policy = {
        "type": "object",
        "required": [
            "policy_version",
            "parameters_sha256",
            "recipe_id",
            "recipe_parameters_sha256",
        ],
        "properties": {
            "policy_version": {"type": "string"},
            "parameters_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "recipe_id": {"type": "string"},
            "recipe_parameters_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "duckscore serve",
            "version": version,
            "description": "Confidence decisions of a duckscore score policy on the hits of "
            "one or many queries: the lines `duckscore run` writes to contract.jsonl.",
        },
        "paths": {
            "/v1/score": {
                "post": {
                    "operationId": "score",
                    "summary": "The contract lines of the queries in `hits`, by query_id.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/ScoreRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": _json(
                            {"$ref": "#/components/schemas/ScoreResponse"}, "The decisions."
                        ),
                        "400": _error("The body is not JSON, or `hits` is not a list of objects."),
                        "413": _error("The body is over the server's --max-body-bytes."),
                        "422": _error("The hits fail the retrieval log's checks."),
                        "500": _error("An internal error (logged by the server)."),
                    },
                }
            },
            "/v1/answers": {
                "post": {
                    "operationId": "answers",
                    "summary": "Seed 001's answer confidence of the logged answers: the lines "
                    "`duckscore answers` writes to contract.jsonl, by answer_id.",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/AnswersRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": _json(
                            {"$ref": "#/components/schemas/AnswersResponse"}, "The decisions."
                        ),
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
                    "responses": {"200": _json({"$ref": "#/components/schemas/Policy"}, "Loaded.")},
                }
            },
            "/v1/reload": {
                "post": {
                    "operationId": "reload",
                    "summary": "Re-read the policy and recipe from disk; swap them in atomically.",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Policy"}, "Now loaded."),
                        "422": _error("The files no longer load; the old policy stays."),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "health",
                    "summary": "Liveness, with the loaded policy's version.",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["status", "policy_version"],
                                "properties": {
                                    "status": {"const": "ok"},
                                    "policy_version": {"type": "string"},
                                },
                            },
                            "Serving.",
                        )
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Hit": hit,
                "ScoreRequest": {
                    "type": "object",
                    "required": ["hits"],
                    "properties": {
                        "hits": {"type": "array", "items": {"$ref": "#/components/schemas/Hit"}}
                    },
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
                    "description": "The tables of `duckscore answers` (docs/answers.md), a list "
                    "of row objects each; `events` is optional.",
                    "required": ["answers", "citations", "chunks"],
                    "properties": {
                        name: {"type": "array", "items": {"type": "object"}}
                        for name in ("answers", "citations", "chunks", "events")
                    },
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
                "Policy": policy,
                "Error": _ERROR,
            }
        },
    }
