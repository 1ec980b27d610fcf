"""Loading models: what a directory declares, the server's model names, GGUF conversion, fingerprints."""
