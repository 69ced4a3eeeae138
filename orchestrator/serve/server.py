"""Running the app under uvicorn: one process, or N workers in uvicorn's factory mode.

With one process the Scorer is loaded before uvicorn starts (a bad policy fails at once, in one
line), SIGHUP reloads it (the same as POST /v1/reload), and SIGTERM or Ctrl-C stop the server
gracefully: uvicorn stops accepting, finishes the requests in flight, and the command exits 0.
With N > 1 workers uvicorn needs an import string: each worker process builds its own app with
`app_from_environment`, from the settings this process puts in DUCKSCORE_SERVE_SETTINGS; uvicorn's
supervisor then restarts the workers on SIGHUP (each loads the policy from disk again).

The address is bound here first (`listen`), so an address in use is one line naming host:port
and exit 2, as any bad option, where uvicorn logs several lines and exits 3.
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import gc
import json
import logging
import os
import signal
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from ..api.live_settings import LiveSettings
from ..api.scorer import Scorer
from ..core.connection import EngineSettings
from ..core.errors import OptionError
from ..runner.job import Job
from .app import DEFAULT_MAX_BODY_BYTES, create_app

SETTINGS_VARIABLE = "DUCKSCORE_SERVE_SETTINGS"
FACTORY = "duckscore.serve.server:app_from_environment"
log = logging.getLogger("duckscore.serve")


@dataclass(frozen=True)
class ScorerSettings:
    """What the server scores with (the job, loaded again on each reload) and its body limit."""

    job: Job
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    scoring_threads: int | None = None
    instincts_db: str | None = None  # a DuckDB store file or a postgresql:// URL
    live: LiveSettings = field(default_factory=LiveSettings)  # batching and recycling

    def make_scorer(self) -> Scorer:
        return Scorer(self.job, live=self.live)

    def record(self) -> str:
        """As JSON, for the worker processes (from_record reads it back)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_record(cls, text: str) -> ScorerSettings:
        raw = json.loads(text)
        job: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in raw["job"].items()
        }
        if job["settings"] is not None:
            job["settings"] = EngineSettings(**job["settings"])
        return cls(
            Job(**job), raw["max_body_bytes"], raw["scoring_threads"], raw["instincts_db"],
            LiveSettings(**raw["live"]),
        )  # fmt: skip


def app_from_environment() -> Any:
    """uvicorn's factory for N workers: the app of the settings in DUCKSCORE_SERVE_SETTINGS."""
    settings = ScorerSettings.from_record(os.environ[SETTINGS_VARIABLE])
    _server_log()
    return _settled(app_of(settings))


def _settled(app: Any) -> Any:
    """`app`, with every object the process holds at its start (the modules, the policy, the
    scorer) moved out of the garbage collector's reach: its full passes over them took about
    40 ms every second or two under load, every request in flight waiting (docs/live.md)."""
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)  # at the exit, collected as before (DuckDB's bindings count)
    return app


def _server_log() -> None:
    """The server's log on stderr, `LEVEL: message`, in the server and in each worker (where,
    unconfigured, the package's NullHandler would keep an internal error's line unsaid)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")


def app_of(settings: ScorerSettings) -> Any:
    from .instincts import InstinctService

    store = settings.instincts_db
    return create_app(
        settings.make_scorer,
        max_body_bytes=settings.max_body_bytes,
        scoring_threads=settings.scoring_threads,
        instincts=None if store is None else InstinctService(store),
        live=settings.live,
    )


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound to host:port as uvicorn binds it; an address that cannot be
    bound (in use, not this machine's, a port the user may not open) is one line naming it,
    where uvicorn would log its own lines and exit 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = address(host, port)
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on accepted sockets of that protocol;
    # with proto 0, a response's body waits for the client's delayed ACK (about 40 ms)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise OptionError(
                f"--host/--port {where}: the address is already in use (another server "
                "listens there: stop it, or choose another --port)"
            ) from None
        reason = exc.strerror or str(exc)
        raise OptionError(f"--host/--port {where}: cannot listen there: {reason}") from None
    sock.set_inheritable(True)
    return sock


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(settings: ScorerSettings, host: str, port: int, workers: int = 1) -> None:
    """Serve until SIGTERM or Ctrl-C; returns once the requests in flight are answered."""
    import uvicorn

    sock = listen(host, port)
    _server_log()
    common: dict[str, Any] = {"host": host, "port": port, "access_log": False, "lifespan": "on"}
    if workers > 1:
        os.environ[SETTINGS_VARIABLE] = settings.record()
        try:
            settings.make_scorer().close()  # a policy that does not load fails here, in one line
        finally:
            sock.close()  # uvicorn's supervisor binds its own (its API for a socket varies)
        _quiet_after_shutdown()
        uvicorn.run(FACTORY, factory=True, workers=workers, **common)
        return
    try:
        app = _settled(app_of(settings))
    except BaseException:
        sock.close()
        raise
    server = uvicorn.Server(uvicorn.Config(app, **common))
    where = address(host, sock.getsockname()[1])  # --port 0: the port the system chose
    log.info("listening on http://%s (SIGTERM or Ctrl-C stops, SIGHUP reloads)", where)
    service = app.state.service

    async def reload_on_hup() -> None:
        try:
            scorer = await asyncio.to_thread(service.reload)
        except Exception as exc:  # the old policy stays; say why in one line
            log.error("SIGHUP: reload failed, policy %s kept: %s",
                      service.current.policy.version, " ".join(str(exc).split()))  # fmt: skip
        else:
            log.info("SIGHUP: reloaded, policy %s", scorer.policy.version)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def on_hup() -> None:
            task = loop.create_task(reload_on_hup())
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        loop.add_signal_handler(signal.SIGHUP, on_hup)
        try:
            await server.serve(sockets=[sock])
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
            sock.close()

    _quiet_after_shutdown()
    asyncio.run(main())


def _quiet_after_shutdown() -> None:
    """uvicorn catches SIGTERM and SIGINT while it serves, shuts down gracefully, then raises
    the signal again for the handler it found: that is the `duckscore` command's, which would
    report an interrupted command (status 143 or 130). A server stopped so has done its job."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
