"""The deployment files match the code: compose (infra/docker-compose.yml), the Kubernetes
manifests (infra/k8s/*.yaml), the Dockerfiles, the object-store page (docs/storage.md) and the API
image's requirements (infra/docker/api-requirements.txt).

Every POOLQ_* name is a Settings field and every value parses; every command parses with the CLI
it names (nothing is run); Redis persists (AOF) behind a password; the worker gets a GPU; beat runs
once; probes hit real routes on the port the API listens on.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import click
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pydantic import AliasChoices
from support.key_signing import TEST_KEY_SIGNING_SECRET

from poolq.jobs.coordination.enqueuer import CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE
from poolq.jobs.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
COMPOSE = INFRA / "docker-compose.yml"
K8S = sorted((INFRA / "k8s").glob("*.yaml"))
DOCKERFILES = {path.name: path for path in (INFRA / "docker").glob("*.Dockerfile")}
STORAGE_PAGE = ROOT / "docs" / "storage.md"


def _env_names(name: str, field) -> set[str]:
    """POOLQ_<FIELD>, and the POOLQ_* names its validation alias also reads (dtype: POOLQ_COMPUTE_DTYPE)."""
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    return {f"POOLQ_{name.upper()}", *(c for c in choices if isinstance(c, str) and c.startswith("POOLQ_"))}


SETTING_NAMES = {env for name, field in Settings.flat_fields().items() for env in _env_names(name, field)}
POOLQ_NAME = re.compile(r"\bPOOLQ_[A-Z0-9_]+\b")
FIRST_PARTY = {"api", "jobs", "engine", "storage"}


# -- loading -------------------------------------------------------------------------------------------

def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _k8s_documents() -> list[dict]:
    docs = [doc for path in K8S for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    assert docs, "no manifests under infra/k8s"
    return docs


K8S_DEPLOYMENTS = ("poolq-api", "poolq-worker", "poolq-control-worker", "poolq-webhook-worker", "poolq-beat", "poolq-flower")

def _k8s(kind: str, name: str) -> dict:
    [doc] = [d for d in _k8s_documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _container(workload: dict) -> dict:
    [container] = workload["spec"]["template"]["spec"]["containers"]
    return container


def _dockerfile_cmd(name: str) -> list[str]:
    [cmd] = re.findall(r"(?m)^CMD\s+(\[.*\])\s*$", DOCKERFILES[name].read_text(encoding="utf-8"))
    return json.loads(cmd)


def _dockerfile_env(name: str) -> dict[str, str]:
    """``ENV A=1 B=2`` (continued lines too) of a Dockerfile."""
    text = DOCKERFILES[name].read_text(encoding="utf-8").replace("\\\n", " ")
    env = {}
    for line in re.findall(r"(?m)^ENV\s+(.*)$", text):
        env.update(part.split("=", 1) for part in shlex.split(line))
    return env


_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _compose_command(service: dict) -> list[str]:
    """What a compose service runs: its ``command``, else its image's CMD. Interpolations (compose
    substitutes them before splitting) read ``${NAME}``."""
    command = service.get("command")
    if command is None:
        return _dockerfile_cmd(Path(service["build"]["dockerfile"]).name)
    if isinstance(command, str):
        return shlex.split(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}", r"${\1}", command))
    return list(command)


def _interpolated(value: str) -> list[str]:
    """Names compose substitutes into ``value`` (``$$`` is a literal ``$``, left to the container)."""
    return [braced or bare for braced, bare in _INTERPOLATION.findall(value.replace("$$", ""))]


def _strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in (*_strings(key), *_strings(value))]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [node] if isinstance(node, str) else []


# -- POOLQ_* names and values ---------------------------------------------------------------------------

def _named_variables() -> dict[str, set[str]]:
    """Every POOLQ_* name each deployment file sets or refers to."""
    named = {
        "docker-compose.yml": {n for s in _strings(_compose()) for n in POOLQ_NAME.findall(s.replace("$$", "$"))},
        **{path.name: set(POOLQ_NAME.findall(path.read_text(encoding="utf-8"))) for path in K8S},
        **{name: set(POOLQ_NAME.findall(path.read_text(encoding="utf-8"))) for name, path in DOCKERFILES.items()},
        "k8s/README.md": set(POOLQ_NAME.findall((INFRA / "k8s" / "README.md").read_text(encoding="utf-8"))),
        "storage.md": set(POOLQ_NAME.findall(STORAGE_PAGE.read_text(encoding="utf-8"))),
    }
    assert named["docker-compose.yml"] and named["20-config.yaml"] and named["storage.md"]
    return named


def test_every_poolq_variable_named_is_a_setting():
    unknown = {file: sorted(names - SETTING_NAMES) for file, names in _named_variables().items() if names - SETTING_NAMES}
    assert unknown == {}, f"not fields of poolq.jobs.settings.Settings (env prefix POOLQ_): {unknown}"


SEAWEED_KEYS = {"SEAWEED_JWT_KEY", "SEAWEED_JWT_READ_KEY", "SEAWEED_FILER_JWT_KEY", "SEAWEED_FILER_JWT_READ_KEY"}


def test_compose_interpolates_only_settings_the_redis_password_and_seaweedfs_keys():
    names = {name for s in _strings(_compose()) for name in _interpolated(s)}
    assert names - SETTING_NAMES == {"REDIS_PASSWORD", *SEAWEED_KEYS}, names


def _settings_from(env: dict[str, str], monkeypatch) -> Settings:
    for name in [n for n in os.environ if n.startswith("POOLQ_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("POOLQ_"):
            monkeypatch.setenv(name, str(value))
    return Settings()


def test_compose_settings_parse_and_name_one_store(monkeypatch):
    compose = _compose()
    env = {name: _INTERPOLATION.sub("placeholder", value) for name, value in compose["x-poolq-env"].items()}
    settings = _settings_from({**_dockerfile_env("worker.Dockerfile"), **env}, monkeypatch)
    assert settings.storage.store == "s3" and settings.storage.s3_endpoint_url == "http://seaweedfs:8333"
    assert settings.broker.redis_url.startswith("redis://:placeholder@redis:6379/")
    for name in ("worker", "control-worker", "webhook-worker", "beat"):
        assert compose["services"][name]["environment"] == compose["x-poolq-env"], name  # one configuration
    for name in ("api", "flower"):  # the same, and a secret of their own
        environment = compose["services"][name]["environment"]
        assert environment.items() >= compose["x-poolq-env"].items() and len(environment) == len(compose["x-poolq-env"]) + 1
    # SeaweedFS creates the bucket the services use
    seaweed = " ".join(_compose_command(compose["services"]["seaweedfs"]))
    assert f"-bucket={settings.storage.bucket}" in seaweed


def test_k8s_settings_parse(monkeypatch):
    config = _k8s("ConfigMap", "poolq-config")["data"]
    secret = _k8s("Secret", "poolq-secrets")["stringData"]
    worker_env = {item["name"]: item["value"] for item in _container(_k8s("Deployment", "poolq-worker")).get("env", [])}
    settings = _settings_from({**config, **secret, **worker_env}, monkeypatch)
    assert settings.storage.store == "s3" and settings.serving.device == "cuda" and settings.serving.dtype == "auto"
    assert settings.broker.redis_url.startswith(f"redis://:{secret['REDIS_PASSWORD']}@")  # the password Redis requires
    own = {"poolq-api": {"poolq-api-secrets"}, "poolq-flower": {"poolq-flower-secrets"}}
    for name in K8S_DEPLOYMENTS:  # the same values
        sources = _env_sources(name)
        assert sources == {"poolq-config", "poolq-secrets", *own.get(name, ())}, name


def _env_sources(deployment: str) -> set[str]:
    env_from = _container(_k8s("Deployment", deployment))["envFrom"]
    return {(ref.get("configMapRef") or ref.get("secretRef"))["name"] for ref in env_from}


# -- commands --------------------------------------------------------------------------------------------

def _commands() -> dict[str, list[str]]:
    compose = _compose()["services"]
    commands = {f"compose {name}": _compose_command(compose[name])
                for name in ("api", "worker", "control-worker", "webhook-worker", "beat", "flower")}
    for name in K8S_DEPLOYMENTS:
        container = _container(_k8s("Deployment", name))
        commands[f"k8s {name}"] = [*container.get("command", []), *container.get("args", [])]
    commands.update({f"image {name}": _dockerfile_cmd(name) for name in DOCKERFILES})
    return commands


def _parse_click(command: click.Command, prog: str, args: list[str]) -> click.Context:
    """Parse ``args`` down to the leaf command without running anything (UsageError if they do not parse)."""
    context = command.make_context(prog, list(args), resilient_parsing=False)
    while isinstance(context.command, click.Group):
        with warnings.catch_warnings():  # click 8.2 deprecates protected_args (merged into args in 9)
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*context.protected_args, *context.args]
        name, sub, sub_args = context.command.resolve_command(context, rest)
        context = sub.make_context(name, sub_args, parent=context)
    return context


def _check_command(argv: list[str]) -> None:
    program, args = argv[0], argv[1:]
    if program == "poolq":
        from poolq.api.cli.main import main

        _parse_click(main, "poolq", args)
    elif program == "uvicorn":
        uvicorn_cli = importlib.import_module("uvicorn.main").main  # (the package's `main` is a function)
        context = _parse_click(uvicorn_cli, "uvicorn", args)
        module, _, attribute = context.params["app"].partition(":")
        target = getattr(importlib.import_module(module), attribute)
        assert callable(target) if context.params["factory"] else target is not None
    else:
        raise AssertionError(f"unknown program {program!r} in {argv}")


def test_every_command_parses_with_the_cli_it_names():
    commands = _commands()
    assert commands["compose worker"][:4] == ["poolq", "worker", "--gpus", "0"]
    assert commands["k8s poolq-worker"][:4] == ["poolq", "worker", "--gpus", "0"]
    assert commands["compose beat"] == commands["k8s poolq-beat"] == ["poolq", "beat"]
    # Control work runs apart from the compute workers, in both deployments
    assert "--queues" in commands["compose worker"] and "--queues" in commands["k8s poolq-worker"]
    for where in ("compose worker", "k8s poolq-worker"):
        assert commands[where][commands[where].index("--queues") + 1] == "gpu", where
    for where in ("compose control-worker", "k8s poolq-control-worker"):
        assert commands[where][:5] == ["poolq", "worker", "--queues", "control", "--concurrency"], where
    # ... and webhook deliveries apart from both: every queue poolq sends to has its workers, in both deployments
    for deployment in ("compose", "k8s"):
        consumed = {queue for where, argv in commands.items() if where.startswith(deployment) and "--queues" in argv
                    for queue in argv[argv.index("--queues") + 1].split(",")}
        assert consumed == {CONTROL_QUEUE, GPU_QUEUE, WEBHOOK_QUEUE}, deployment
    for where in ("compose webhook-worker", "k8s poolq-webhook-worker"):
        assert commands[where][:4] == ["poolq", "worker", "--queues", WEBHOOK_QUEUE], where
    # The API runs as `poolq serve`: uvicorn with its proxy headers off (POOLQ_TRUSTED_PROXIES decides)
    assert commands["k8s poolq-api"][:2] == ["poolq", "serve"]
    for where, argv in commands.items():
        try:
            _check_command(argv)
        except click.ClickException as exc:
            pytest.fail(f"{where}: {argv} does not parse: {exc.format_message()}")


def test_a_command_that_does_not_exist_is_caught():
    with pytest.raises(click.ClickException):
        _check_command(["poolq", "worker", "--gpu", "0"])
    with pytest.raises(click.ClickException):
        _check_command(["poolq", "scheduler"])
    with pytest.raises(AttributeError):
        _check_command(["uvicorn", "poolq.api.server.app:make_app", "--factory"])


# -- Redis, GPU, beat, probes ------------------------------------------------------------------------------

def _redis_options(argv: list[str]) -> dict[str, str]:
    args = argv[1:] if argv and argv[0] == "redis-server" else argv
    return {args[i].removeprefix("--"): args[i + 1] for i in range(0, len(args) - 1, 2) if args[i].startswith("--")}


def test_redis_keeps_an_append_only_file_behind_a_password():
    compose = _redis_options(_compose_command(_compose()["services"]["redis"]))
    container = _container(_k8s("StatefulSet", "redis"))
    k8s = _redis_options([*container.get("command", []), *container.get("args", [])])
    for options in (compose, k8s):
        assert options["appendonly"] == "yes" and options["requirepass"].strip()
        assert options["maxmemory-policy"] == "noeviction"  # a full Redis must never drop queued tasks
    # the password the services' URL carries
    assert compose["requirepass"] == "${REDIS_PASSWORD}"
    assert _interpolated(_compose()["x-poolq-env"]["POOLQ_REDIS_URL"]) == ["REDIS_PASSWORD"]
    assert k8s["requirepass"] == "$(REDIS_PASSWORD)"
    assert {item["name"] for item in container["env"]} >= {"REDIS_PASSWORD"}


def test_the_worker_requests_a_gpu():
    resources = _container(_k8s("Deployment", "poolq-worker"))["resources"]
    assert int({**resources.get("requests", {}), **resources.get("limits", {})}["nvidia.com/gpu"]) >= 1
    [device] = _compose()["services"]["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"] and device["count"] >= 1


def test_beat_runs_exactly_once():
    beat = _k8s("Deployment", "poolq-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"  # a rollout never runs two
    compose = _compose()["services"]["beat"]
    assert compose.get("deploy", {}).get("replicas", 1) == 1 and "scale" not in compose


def _get_routes(tmp_path: Path) -> set[str]:
    from support.security_app import holding_context

    from poolq.api.server.app import create_app

    settings = Settings(store="local", local_store_root=tmp_path, output_prefix="jobs")
    app = create_app(holding_context(settings), settings, checks=[])
    return {path for path, item in app.openapi()["paths"].items() if "get" in item}


def test_probes_hit_real_routes_on_the_port_the_api_listens_on(tmp_path):
    deployment = _k8s("Deployment", "poolq-api")
    container = _container(deployment)
    argv = container["command"]
    port = int(argv[argv.index("--port") + 1])
    assert [p["containerPort"] for p in container["ports"]] == [port]
    routes = _get_routes(tmp_path)
    for probe in ("readinessProbe", "livenessProbe"):
        http = container[probe]["httpGet"]
        assert http["path"] in routes and int(http["port"]) == port, probe
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"  # checks Redis and the store
    service = _k8s("Service", "poolq-api")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [port]
    image_cmd = _dockerfile_cmd("api.Dockerfile")
    assert int(image_cmd[image_cmd.index("--port") + 1]) == port
    assert _compose()["services"]["api"]["ports"] == [f"{port}:{port}"]


# -- trust boundaries: networks, secrets, logins -----------------------------------------------------------

def test_compose_publishes_the_api_alone_and_keeps_the_rest_on_an_internal_network():
    compose = _compose()
    assert compose["networks"]["backend"]["internal"] is True
    default = {name: service for name, service in compose["services"].items() if not service.get("profiles")}
    assert {name for name, service in default.items() if service.get("ports")} == {"api"}
    for name, service in default.items():
        if name == "s3-door":  # in seaweedfs's network namespace
            assert service["network_mode"] == "service:seaweedfs" and "networks" not in service
            continue
        # The API on edge for its published port; the webhook worker to reach receivers outside (it publishes none)
        assert service["networks"] == (["backend", "edge"] if name in ("api", "webhook-worker") else ["backend"]), name
    flower = compose["services"]["flower"]  # opt-in (--profile ops), on the host's loopback only
    assert flower["profiles"] == ["ops"] and all(port.startswith("127.0.0.1:") for port in flower["ports"])


def test_compose_seaweedfs_serves_data_on_s3_alone_with_keys(monkeypatch):
    compose = _compose()
    seaweed = compose["services"]["seaweedfs"]
    command = " ".join(_compose_command(seaweed))
    for flag in ("-disableHttp", "-s3.config=", "-s3.iam=false", "-admin.ui=false", "-webdav=false"):
        assert flag in command, flag
    # Every weed listener on the container's loopback; the door forwards the services' S3 port to S3's alone
    assert "-ip.bind=127.0.0.1" in command.split() and "-ip=127.0.0.1" in command.split()
    [inner_port] = re.findall(r"-s3\.port=(\d+)", command)
    door = compose["services"]["s3-door"]
    env = {name: _INTERPOLATION.sub("placeholder", value) for name, value in compose["x-poolq-env"].items()}
    outer_port = _settings_from(env, monkeypatch).storage.s3_endpoint_url.rsplit(":", 1)[1]
    assert door["command"] == [f"TCP-LISTEN:{outer_port},fork,reuseaddr", f"TCP:127.0.0.1:{inner_port}"]
    jwt = {"WEED_JWT_SIGNING_KEY", "WEED_JWT_SIGNING_READ_KEY", "WEED_JWT_FILER_SIGNING_KEY", "WEED_JWT_FILER_SIGNING_READ_KEY"}
    environment = seaweed["environment"]
    assert jwt <= environment.keys()
    assert {name for key in jwt for name in _interpolated(environment[key])} == SEAWEED_KEYS
    assert all(":?" in environment[key] for key in jwt)  # compose refuses to start without them


def test_the_key_signing_secret_is_the_apis_alone(monkeypatch):
    compose = _compose()["services"]
    holders = {name for name, service in compose.items() if "POOLQ_KEY_SIGNING_SECRET" in service.get("environment", {})}
    assert holders == {"api"} and ":?" in compose["api"]["environment"]["POOLQ_KEY_SIGNING_SECRET"]
    readers = {doc["metadata"]["name"] for doc in _k8s_documents() if doc["kind"] == "Deployment"
               and "poolq-api-secrets" in _env_sources(doc["metadata"]["name"])}
    assert readers == {"poolq-api"}
    secret = _k8s("Secret", "poolq-api-secrets")["stringData"]
    settings = _settings_from(secret, monkeypatch)
    assert len(settings.access.key_signing_secret.get_secret_value()) >= 32
    assert "POOLQ_KEY_SIGNING_SECRET" not in _k8s("Secret", "poolq-secrets")["stringData"]  # workers never see it


def test_flower_asks_for_a_login_in_both_deployments(monkeypatch):
    compose = _compose()["services"]["flower"]
    assert ":?" in compose["environment"]["POOLQ_FLOWER_BASIC_AUTH"]
    login = _k8s("Secret", "poolq-flower-secrets")["stringData"]
    user, _, password = _settings_from(login, monkeypatch).access.flower_basic_auth.get_secret_value().partition(":")
    assert user and password
    assert "poolq-flower-secrets" in _env_sources("poolq-flower")
    # Both run the API image, which has Flower
    assert _compose()["services"]["flower"]["build"]["dockerfile"] == "infra/docker/api.Dockerfile"
    assert _container(_k8s("Deployment", "poolq-flower"))["image"].startswith("poolq-api:")
    assert "flower" in _api_image_installs()
    assert not [doc for doc in _k8s_documents() if doc["kind"] == "Ingress"]


def test_network_policies_admit_the_api_port_and_redis_from_poolqs_processes_only():
    policies = {doc["metadata"]["name"]: doc["spec"] for doc in _k8s_documents() if doc["kind"] == "NetworkPolicy"}
    deny = policies["default-deny-ingress"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and not deny.get("ingress")
    labels = {name: _k8s("Deployment", name)["spec"]["template"]["metadata"]["labels"]["app"]
              for name in K8S_DEPLOYMENTS}
    admitted = {spec["podSelector"]["matchLabels"]["app"]: spec["ingress"] for spec in policies.values() if spec.get("ingress")}
    assert admitted.keys() == {"poolq-api", "redis"}  # workers, beat, Flower: no way in
    api_port = _container(_k8s("Deployment", "poolq-api"))["ports"][0]["containerPort"]
    assert admitted["poolq-api"] == [{"ports": [{"port": api_port, "protocol": "TCP"}]}]
    [rule] = admitted["redis"]
    [selector] = rule["from"]
    [expression] = selector["podSelector"]["matchExpressions"]
    assert expression["key"] == "app" and set(expression["values"]) == set(labels.values())
    assert rule["ports"] == [{"port": 6379, "protocol": "TCP"}]
    assert _k8s("StatefulSet", "redis")["spec"]["template"]["metadata"]["labels"] == {"app": "redis"}


# -- docs/storage.md ---------------------------------------------------------------------------------------

def test_the_storage_page_covers_aws_minio_and_seaweedfs():
    text = STORAGE_PAGE.read_text(encoding="utf-8")
    for heading in ("## AWS S3", "## MinIO", "## SeaweedFS"):
        assert heading in text
    # each store's section says how to point poolq at it
    for section in re.split(r"(?m)^## ", text)[1:4]:
        assert "POOLQ_STORE=s3" in section and "POOLQ_BUCKET=" in section, section[:40]
    assert set(POOLQ_NAME.findall(text)) <= SETTING_NAMES


def _documented_key_patterns() -> list[str]:
    """The key patterns under "What poolq writes": ``.../x`` continues the job directory above it,
    ``a, b`` names siblings, and a pattern ending in ``/...`` stands for everything under it."""
    fenced = STORAGE_PAGE.read_text(encoding="utf-8").split("## What poolq writes", 1)[1].split("```")[1]
    block = fenced.split("\n", 1)[1]  # past the fence's info string (```text)
    patterns, job_directory = [], None
    for line in block.strip().splitlines():
        names = [name.strip() for name in re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split(",")]
        first = names[0]
        if first.startswith(".../"):
            assert job_directory, f"{line!r} continues no job directory"
            first = job_directory + first[4:]
        elif "<job_id>/" in first:
            job_directory = first[: first.index("<job_id>/") + len("<job_id>/")]
        directory = first.rsplit("/", 1)[0]
        patterns += [first, *(f"{directory}/{sibling}" for sibling in names[1:])]
    return patterns


def test_the_storage_pages_key_layout_is_the_codes(tmp_path):
    """Every key pattern under "What poolq writes" is one the code builds (prefix = the default)."""
    from datetime import datetime, timezone

    from poolq.jobs.ledger.layout import ServiceLayout
    from poolq.jobs.ledger.webhook_records import JOB_ENDED
    from poolq.jobs.tenancy.api_keys import ApiKeyStore
    from poolq.products.schedules.schedule import slot_name
    from poolq.products.webhooks.webhook_secrets import WebhookSecretStore
    from poolq.storage import LocalObjectStore, join_key

    prefix, tenant, job, schedule, digest, attempt = "jobs", "acme", "1" * 32, "2" * 32, "3" * 64, "4" * 16
    upload = "5" * 32
    slot = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    service = ServiceLayout(Settings.flat_fields()["output_prefix"].default)
    assert service.prefix == prefix
    layout = service.job(tenant, job)
    store = LocalObjectStore(tmp_path)
    _, record = ApiKeyStore(store, prefix, signing_secret=TEST_KEY_SIGNING_SECRET).create(tenant)
    WebhookSecretStore(store, prefix).ensure(tenant)  # its record, listed with the key's below
    built = {
        service.active(job), service.idempotency(digest), service.schedule(schedule),
        service.schedule_run(schedule, slot_name(slot)), service.job_index(job),
        join_key(service.uploads_prefix(tenant), f"{upload}.jsonl"), *store.list(""),  # the key record
        layout.spec, layout.inline_input, layout.plan, layout.plan_errors, layout.cancel, layout.shard_input(0, 0),
        layout.shard_commit(0), layout.planning_sections, layout.planning_decided,
        *(layout.section_object(0, name) for name in ("ids.tsv", "skips.npz", "errors.jsonl")),
        layout.stage_record(0, "scan"), layout.stage_record(0, "cut"),
        layout.attempt_part(0, attempt), layout.attempt_errors(0, attempt), layout.carried_part(0),
        layout.errors, layout.manifest, layout.webhook_event(JOB_ENDED), layout.webhook_outcome(JOB_ENDED),
        layout.engine_claim,
    }
    values = {"<prefix>": prefix, "<tenant>": tenant, "<job_id>": job, "<schedule_id>": schedule,
              "<sha256>": digest, "<attempt>": attempt, "<key_id>": record.key_id, "<slot>": slot_name(slot),
              "<upload_id>": upload, "<id>": upload, "<ending>": "jsonl", "NNNNN": "00000",
              "<event>": JOB_ENDED}
    patterns = _documented_key_patterns()
    assert len(patterns) >= 10 and any("manifest.json" in p for p in patterns)
    for pattern in patterns:
        key = pattern
        for placeholder, value in values.items():
            key = key.replace(placeholder, value)
        assert "<" not in key, f"unknown placeholder in {pattern!r}"
        if key.endswith("/..."):
            assert any(k.startswith(key[:-3]) for k in built), f"docs/storage.md: nothing the code writes is under {pattern!r}"
        else:
            assert key in built, f"docs/storage.md names {pattern!r}, which the code never writes"
    # and what must never expire is named as such
    lifecycle = STORAGE_PAGE.read_text(encoding="utf-8").split("Lifecycle rules", 1)[1]
    for area in ("_auth/", "_jobs/", "_active/", "_idempotency/", "_schedules/"):
        assert f"`{area}`" in lifecycle, area


# -- the API image ------------------------------------------------------------------------------------------

# The API process as the image runs it (and beat, which runs from the same image): the app built as
# uvicorn builds it, the CLI, beat's scheduler, uvicorn's own HTTP machinery. A finder placed first
# refuses every installed distribution that api.Dockerfile does not install, as if it were
# absent: optional imports (``try: import orjson``) fall back as they would in the image; a hard
# one fails the process.
_API_PROCESS = """
import json, sys

BLOCKED = set(json.loads(sys.argv[1]))
refused = []

class NotInTheImage:  # wraps every finder: a blocked module is found by none of them, as if absent
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            refused.append(name)
            return None
        return self.inner.find_spec(name, path, target)

    def __getattr__(self, attribute):
        return getattr(self.inner, attribute)

sys.meta_path[:] = [NotInTheImage(finder) for finder in sys.meta_path]
import poolq.api.server.app, poolq.api.cli.main, poolq.worker.beat.beat_process, redbeat.schedulers
# the control worker runs from the API image too
import poolq.worker.worker_startup, poolq.worker.celery_tasks
import uvicorn.main, uvicorn.protocols.http.h11_impl, uvicorn.lifespan.on, uvicorn.loops.asyncio
from poolq.jobs.settings import Settings
settings = Settings(redis_url="redis://127.0.0.1:9/0", store="s3", s3_endpoint_url="http://127.0.0.1:9",
                    s3_access_key_id="x", s3_secret_access_key="y")
app = poolq.api.server.app.create_app(settings=settings)
app.openapi()
assert "all-MiniLM-L6-v2" in app.state.ctx.registry, "the default model is not in the image"
print(json.dumps({"modules": sorted({name.split(".")[0] for name in sys.modules}), "refused": sorted(set(refused))}))
"""


def _requirements(path: Path) -> list[Requirement]:
    return [Requirement(line.split("#", 1)[0].strip()) for line in path.read_text(encoding="utf-8").splitlines()
            if line.split("#", 1)[0].strip()]


def _api_image_installs() -> set[str]:
    """The distributions api.Dockerfile installs: each ``pip install -r`` file's requirements, with
    everything they depend on unless ``--no-deps``. (The final ``pip install --no-deps .`` is poolq.)"""
    text = DOCKERFILES["api.Dockerfile"].read_text(encoding="utf-8")
    installs = re.findall(r"(?m)^RUN pip install (.*?)-r /tmp/(\S+)\s*$", text)
    assert {name for _, name in installs} == {"api-requirements.txt", "api-model-files.txt"}, installs
    names: set[str] = set()
    for options, name in installs:
        requirements = _requirements(INFRA / "docker" / name)
        if "--no-deps" in options.split():
            names |= {canonicalize_name(r.name) for r in requirements}
        else:
            names |= _requirement_closure(requirements)
    return names


def _requirement_closure(requirements: list[Requirement]) -> set[str]:
    """The distributions ``requirements`` install: the named ones and all they depend on."""
    from importlib import metadata

    pending = list(requirements)
    seen: set[tuple[str, frozenset]] = set()
    while pending:
        requirement = pending.pop()
        name, extras = canonicalize_name(requirement.name), frozenset(requirement.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate({"extra": extra}) for extra in extras | {""}):
                pending.append(child)
    return {name for name, _ in seen}


def test_the_api_image_requirements_cover_what_the_api_process_imports():
    from importlib import metadata

    installed = _api_image_installs()
    assert {"fastapi", "starlette", "pydantic-core", "celery", "kombu", "botocore"} <= installed  # the closure works
    # The API image carries no torch (nor what only the worker needs); tests/test_import_rules.py
    # checks the API never imports it, this that the image does not install it anyway.
    assert not installed & {"torch", "transformers", "sentence-transformers", "triton"}, installed
    blocked = sorted(module for module, distributions in metadata.packages_distributions().items()
                     if module not in FIRST_PARTY and module not in sys.stdlib_module_names
                     and not any(canonicalize_name(d) in installed | {"poolq"} for d in distributions))
    assert "torch" in blocked and "fastapi" not in blocked
    out = subprocess.run([sys.executable, "-c", _API_PROCESS, json.dumps(blocked)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (
        "the API process fails with only what api.Dockerfile installs:\n" + out.stderr[-3000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "fastapi" in result["modules"] and "torch" not in result["modules"]
    assert "cognition" in result["refused"]  # the blocking works: an optional packaged model, looked for
