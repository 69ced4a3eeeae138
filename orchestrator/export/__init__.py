"""`duckscore export`: a run's decisions in the shapes other tools import. annotations: the
decisions of a run on a trace export as Arize Phoenix span annotations."""
