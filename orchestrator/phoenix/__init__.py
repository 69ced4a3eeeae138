"""A running Arize Phoenix as the place traces live: `duckscore pull` reads its spans into a
span export (pull.py), `duckscore export annotations --to` posts a run's decisions back as span
and trace annotations (post.py), both through Phoenix's own client (server.py)."""
