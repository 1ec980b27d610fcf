"""The device the engine runs on: CPU features and the compute dtype they pick; out-of-memory detection."""
