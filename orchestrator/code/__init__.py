"""`duckscore entities`: the files, classes, methods and functions of a Python repository with
their line spans, read with the standard library's `ast` — from a folder, or from a git
repository at one or more revisions. entities: one file's rows; sources: the files of a folder
or a revision; table: `entities_table()` and `write_entities()`, the table the code-localization
mapper joins blocks to."""
