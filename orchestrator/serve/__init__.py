"""`duckscore serve`: the live scorer (duckscore.scorer) behind an HTTP JSON API (issue 33).

app.py builds the Starlette app from a function that makes a Scorer (called again on reload);
tables.py reads a request's tables by their table contracts, and openapi.py generates
GET /openapi.json from the same definitions; server.py runs it under uvicorn (one process, or N
workers in uvicorn's factory mode) with SIGHUP reloading the policy. Starlette and uvicorn are the
optional extra `duckscore[serve]`: nothing here imports them until a server is built.
"""
