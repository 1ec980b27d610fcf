"""Long documents: the policy checks, chunk boundaries, and how one request becomes model windows."""
