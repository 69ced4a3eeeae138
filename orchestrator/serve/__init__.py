"""`duckscore serve`: the live scorer (duckscore.scorer) behind an HTTP JSON API (issue 33).

app.py builds the Starlette app from a function that makes a Scorer (called again on reload);
server.py runs it under uvicorn (one process, or N workers in uvicorn's factory mode) with SIGHUP
reloading the policy. Starlette and uvicorn are the optional extra `duckscore[serve]`: nothing
here imports them until a server is built.
"""
