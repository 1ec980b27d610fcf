"""The OpenAI Files and Batch API on poolq jobs: a batch is a poolq job underneath."""
