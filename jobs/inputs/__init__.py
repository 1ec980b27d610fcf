"""A job's inputs: reading URIs and inline records, which inputs a tenant may read, presigned uploads."""
