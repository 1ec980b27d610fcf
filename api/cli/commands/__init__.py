"""The CLI's command groups, one module each (``poolq submit``, ``poolq keys``, ``poolq bench`` ...), imported when they run."""
