"""The interactive lane's worker side: the server thread that answers requests, started in each pool child."""
