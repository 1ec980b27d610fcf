"""Running one shard: its attempt, where its task goes, which engine embeds it, and what it does between steps."""
