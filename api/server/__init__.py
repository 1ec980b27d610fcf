"""The HTTP server: the FastAPI app, its services, authentication, limits and request parsing."""
