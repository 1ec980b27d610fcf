"""`poolq bench families`: long documents through random-weight ModernBERT- and Qwen3-shaped models, packed vs padded."""
