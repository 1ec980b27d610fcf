"""The scale benchmark's parts; ``infra/bench/scale.py`` runs them (its docstring says what is measured, and how)."""
