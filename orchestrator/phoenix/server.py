"""The Phoenix server at a URL, through Phoenix's Python client (`arize-phoenix-client`, an
optional dependency imported when used): the client, and every failure of the server or of the
network as one line naming the option and the URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..common.extras import needs_extra
from ..core.errors import InputError, OptionError

if TYPE_CHECKING:
    import httpx
    from phoenix.client import Client

SCHEMES = ("http", "https")


def phoenix_client(url: str, option: str) -> Client:
    """Phoenix's client for the server at `url` (`http://HOST:PORT`, or a path prefix the server
    is mounted under); the API key of PHOENIX_API_KEY is sent when it is set."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise OptionError(f"{option} {url}: not the URL of a Phoenix server (http://HOST:PORT)")
    try:
        from phoenix.client import Client
    except ImportError:
        raise OptionError(
            f"{option} {url}: {needs_extra('talking to Phoenix', 'phoenix')}"
        ) from None
    return Client(base_url=url)


@contextmanager
def answered(option: str, url: str, not_found: str = "") -> Iterator[None]:
    """A failed request inside the block as one line: the status and Phoenix's own reason (and
    `not_found` after a 404), or why the server could not be reached."""
    import httpx

    try:
        yield
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        hints = {401: "set PHOENIX_API_KEY", 403: "set PHOENIX_API_KEY", 404: not_found}
        hint = f" ({hints[status]})" if hints.get(status) else ""
        raise InputError(
            f"{option} {url}: Phoenix answered {status} {exc.response.reason_phrase}: "
            f"{reason(exc.response)}{hint}"
        ) from None
    except httpx.HTTPError as exc:
        raise InputError(
            f"{option} {url}: cannot reach Phoenix ({str(exc) or type(exc).__name__})"
        ) from None


def reason(response: httpx.Response) -> str:
    """The `detail` of a FastAPI error body, else the body's text, on one line."""
    text = response.text
    try:
        detail = json.loads(text).get("detail", text)
    except (ValueError, AttributeError):
        detail = text
    return " ".join(str(detail).split())[:300] or "no reason given"
