"""`poolq keys`: records signed with POOLQ_KEY_SIGNING_SECRET; `list` names the ones this secret did
not sign, `resign` signs them (rotation, or keys made before records were signed). A local store."""

import json

from click.testing import CliRunner

from poolq.api.cli.main import main


def _env(tmp_path, secret: str | None) -> dict:
    env = {
        "POOLQ_STORE": "local",
        "POOLQ_LOCAL_STORE_ROOT": str(tmp_path / "store"),
        "POOLQ_DEV_DIR": str(tmp_path / "none"),
        "POOLQ_KEY_SIGNING_SECRET": secret,
    }
    return env


def _keys(tmp_path, secret: str | None, *args: str):
    return CliRunner().invoke(main, ["keys", *args], env=_env(tmp_path, secret))


def test_a_key_made_under_another_secret_is_listed_as_rejected_until_resigned(tmp_path):
    old, new = "o" * 40, "n" * 40
    created = _keys(tmp_path, old, "create", "--tenant", "acme")
    assert created.exit_code == 0, created.output
    key_id = created.output.strip().splitlines()[-1].split("_")[1]
    listed = _keys(tmp_path, new, "list")
    assert f"{key_id}  REJECTED: no valid signature" in listed.output and "acme" not in listed.output
    as_json = json.loads(_keys(tmp_path, new, "list", "--json").output)
    assert as_json == [{"key_id": key_id, "rejected": "no valid signature"}]
    resigned = _keys(tmp_path, new, "resign", key_id)
    assert resigned.exit_code == 0 and f"signed {key_id} (tenant acme" in resigned.output
    assert "active" in _keys(tmp_path, new, "list").output and "REJECTED" not in _keys(tmp_path, new, "list").output
    assert "REJECTED" in _keys(tmp_path, old, "list").output  # the rotated-out secret's tag is gone
    missing = _keys(tmp_path, new, "resign", "0" * 16)
    assert missing.exit_code == 4 and "no key record" in missing.output


def test_no_key_command_runs_without_a_signing_secret(tmp_path):
    for args in (("create", "--tenant", "acme"), ("list",), ("revoke", "0" * 16), ("resign", "0" * 16)):
        result = _keys(tmp_path, None, *args)
        assert result.exit_code == 2 and "POOLQ_KEY_SIGNING_SECRET must be set" in result.output, args
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("*.json"))
