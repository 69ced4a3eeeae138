"""duckscore from Python: `import duckscore as ds; ds.run(log).contract.df()` (see functions.py)."""
