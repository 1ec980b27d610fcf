"""The ``poolq`` command line: one module per group of verbs, with shared output and progress."""
