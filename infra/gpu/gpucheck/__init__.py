"""The GPU first-contact check's parts (``infra/gpu/check.py`` runs them): what it checks, the gates,
the random models, the matrix, the worker smoke test and the report. Imported as ``gpucheck`` with
``infra/gpu`` first on the path, as ``python3 infra/gpu/check.py`` has it."""
