"""``python -m poolq.api ...`` is the ``poolq`` command (used by the dev stack to start its processes)."""
from poolq.api.cli.main import main

main()
