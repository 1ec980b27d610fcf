"""The key-signing secret of the test session (tests/conftest.py puts it in POOLQ_KEY_SIGNING_SECRET,
so every API, CLI and Settings the tests make signs and checks key records with it)."""

TEST_KEY_SIGNING_SECRET = "poolq-test-key-signing-secret-0123456789abcdef"
