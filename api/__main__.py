"""``python -m api ...`` is the ``poolq`` command (used by the dev stack to start its processes)."""
from .cli import main

main()
