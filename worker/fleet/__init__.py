"""What ``poolq worker`` keeps running: the set of worker processes, their supervisor, and which GPU each sees."""
