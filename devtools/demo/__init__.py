"""`poolq demo`: the whole path on a local stack (demo.py), with a shipped sample corpus (sample_corpus.py)."""
