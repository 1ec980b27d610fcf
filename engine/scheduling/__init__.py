"""Scheduling the engine's steps: the scheduler (no torch), one step's work, and retrying a step that ran out of memory."""
