"""`poolq serve` refuses to start without a key-signing secret, in one line (not a traceback)."""
from click.testing import CliRunner

from poolq.api.cli.main import main


def test_serve_without_a_key_signing_secret_says_what_to_set():
    result = CliRunner().invoke(main, ["serve", "--port", "0"], env={"POOLQ_KEY_SIGNING_SECRET": ""})
    assert result.exit_code == 1
    assert "Error: POOLQ_KEY_SIGNING_SECRET must be set" in result.output
    assert "Traceback" not in result.output
