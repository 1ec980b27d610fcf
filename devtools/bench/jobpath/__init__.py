"""`poolq bench jobpath`: the whole job path with a stand-in engine, its report, and the host reads per step."""
