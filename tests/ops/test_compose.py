"""Static checks of the container deployment: docker-compose.yml and ops/Dockerfile.

No Docker engine runs where these tests run, so the compose file is validated against
the Compose Specification's JSON schema and cross-checked against the code it starts:
the `memoryd` subcommands and options must exist in the real CLI, and the Celery app
path used by Flower and the worker healthcheck must import.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.dockerfile import copied_sources
from tests.support.dockerfile import instructions as dockerfile_instructions

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "ops" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
# Vendored (Apache-2.0, with its license): the tests need nothing beside the checkout.
DEFAULT_SCHEMA = ROOT / "tests" / "data" / "compose_spec" / "compose-spec.json"

SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", ">&2"}
PINNED_TAG = re.compile(r"^v?\d+\.\d+\.\d+")  # full version, optionally with a suffix
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


# ---- loading ---------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (Compose does, PyYAML does not)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    assert COMPOSE_FILE.is_file(), f"{COMPOSE_FILE} is missing"
    data = yaml.load(COMPOSE_FILE.read_text(encoding="utf-8"), Loader=_StrictLoader)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), (
        "docker-compose.yml must be a mapping with a `services` mapping"
    )
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> str:
    assert DOCKERFILE.is_file(), f"{DOCKERFILE} is missing"
    return DOCKERFILE.read_text(encoding="utf-8")


def _schema_path() -> Path:
    override = os.environ.get("MEMORYD_COMPOSE_SCHEMA")
    return Path(override) if override else DEFAULT_SCHEMA


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    path = _schema_path()
    if not path.is_file():
        pytest.fail(
            f"Compose Specification schema not found at {path}. It ships in "
            "tests/data/compose_spec/compose-spec.json; set MEMORYD_COMPOSE_SCHEMA to "
            "its path to use another copy.",
            pytrace=False,
        )
    return json.loads(path.read_text(encoding="utf-8"))


# ---- helpers ---------------------------------------------------------------------


def _interpolate_defaults(value: str) -> str:
    """Resolve `${VAR:-default}` / `${VAR-default}` to the default, `$$` to `$`."""
    value = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", value)
    return value.replace("$$", "$")


def _argv(command: Any) -> list[str]:
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    return [str(part) for part in command]


def _healthcheck_argv(service: dict[str, Any]) -> list[str]:
    test = (service.get("healthcheck") or {}).get("test")
    if test is None:
        return []
    if isinstance(test, str):
        return shlex.split(test)
    kind, *rest = test
    if kind == "CMD-SHELL":
        return shlex.split(" ".join(rest))
    if kind == "CMD":
        return list(rest)
    return []  # NONE


def _dockerfile_execs(text: str) -> list[list[str]]:
    out = []
    for word, rest in dockerfile_instructions(text):
        if word in {"CMD", "ENTRYPOINT"} and rest.startswith("["):
            out.append(json.loads(rest))
        elif word in {"CMD", "ENTRYPOINT", "RUN"}:
            out.append(shlex.split(rest))
    return out


def _all_argvs(
    services: dict[str, dict[str, Any]], dockerfile: str
) -> Iterator[tuple[str, list[str]]]:
    for name, service in services.items():
        yield f"services.{name}.entrypoint", _argv(service.get("entrypoint"))
        yield f"services.{name}.command", _argv(service.get("command"))
        yield f"services.{name}.healthcheck", _healthcheck_argv(service)
    for argv in _dockerfile_execs(dockerfile):
        yield "ops/Dockerfile", argv


def _invocations(argv: list[str], program: str) -> Iterator[list[str]]:
    """Arguments of each run of `program` (in command position), up to a shell operator."""
    for i, token in enumerate(argv):
        at_command_position = i == 0 or argv[i - 1] in SHELL_OPERATORS
        if at_command_position and Path(token).name == program:
            args = []
            for arg in argv[i + 1 :]:
                if arg in SHELL_OPERATORS:
                    break
                args.append(arg)
            yield args


def _option_values(args: list[str], *names: str) -> list[str]:
    values = []
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                values.append(args[i + 1])
            elif name.startswith("--") and arg.startswith(name + "="):
                values.append(arg.split("=", 1)[1])
    return values


def _environment(service: dict[str, Any]) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = [item.partition("=") for item in env]
        return {key: value if sep else None for key, sep, value in pairs}
    return {key: None if value is None else str(value) for key, value in env.items()}


def _load_cli() -> Any:
    """The click group behind the `memoryd` console script (`memoryd.workers.cli`'s typer app)."""
    import typer

    cli = importlib.import_module("memoryd.workers.cli")
    app = getattr(cli, "app", None)
    if not isinstance(app, typer.Typer):
        apps = [value for value in vars(cli).values() if isinstance(value, typer.Typer)]
        assert len(apps) == 1, "memoryd.workers.cli must define exactly one typer.Typer app"
        app = apps[0]
    group = typer.main.get_command(app)
    assert hasattr(group, "commands"), "the memoryd CLI must be a group of subcommands"
    return group


# ---- the schema ------------------------------------------------------------------


def test_schema_is_draft_07(schema: dict[str, Any]) -> None:
    declared = schema.get("$schema", "")
    assert "draft-07" in declared, f"expected a Draft 7 schema, $schema is {declared!r}"
    jsonschema.Draft7Validator.check_schema(schema)


def test_compose_file_matches_compose_spec(compose: dict[str, Any], schema: dict[str, Any]) -> None:
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path))
    report = "\n".join(
        f"  {'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in errors
    )
    assert not errors, f"docker-compose.yml violates the Compose Specification:\n{report}"


# ---- images and builds -----------------------------------------------------------


def test_services_that_build_use_ops_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    built = [name for name, service in services.items() if "build" in service]
    assert built, "no service builds the memoryd image"
    for name in built:
        build = services[name]["build"]
        assert isinstance(build, dict), f"{name}: build must name its dockerfile"
        context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
        dockerfile = (context / build.get("dockerfile", "Dockerfile")).resolve()
        assert dockerfile == DOCKERFILE, f"{name}: builds {dockerfile}, not ops/Dockerfile"
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        assert context == ROOT, f"{name}: the build context must be the repository root"


def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service.get("image")
        assert image, f"{name}: no image (built services must tag their image too)"
        image = _interpolate_defaults(image)
        if DIGEST.search(image):
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag != "latest", f"{name}: image {image!r} uses latest"
        assert PINNED_TAG.match(tag), f"{name}: image {image!r} is not pinned to a full version"


def test_built_image_tag_is_the_project_version(services: dict[str, dict[str, Any]]) -> None:
    version = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"]
    for name, service in services.items():
        if "build" in service:
            tag = _interpolate_defaults(service["image"]).rpartition(":")[2]
            assert tag == version, f"{name}: image tag {tag!r} but pyproject version {version!r}"


# ---- the code the containers start ------------------------------------------------


def test_console_script_target_exists() -> None:
    scripts = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, attr = scripts["memoryd"].partition(":")
    target = getattr(importlib.import_module(module), attr, None)
    assert callable(target), f"console script target {scripts['memoryd']!r} is not callable"


def test_memoryd_commands_exist_in_cli(
    services: dict[str, dict[str, Any]], dockerfile: str
) -> None:
    group = _load_cli()
    available = sorted(group.commands)
    checked = set()
    for where, argv in _all_argvs(services, dockerfile):
        for args in _invocations(argv, "memoryd"):
            if not args or args[0].startswith("-"):
                continue  # e.g. `memoryd --help`
            sub, rest = args[0], args[1:]
            assert sub in group.commands, (
                f"{where}: `memoryd {sub}` is not a CLI subcommand (the CLI has {available})"
            )
            command = group.commands[sub]
            try:
                with command.make_context(f"memoryd {sub}", list(rest)):
                    pass
            except Exception as exc:  # click's, or typer's vendored click's, UsageError
                message = exc.format_message() if hasattr(exc, "format_message") else exc
                pytest.fail(f"{where}: `memoryd {' '.join(args)}` is rejected: {message}")
            checked.add(sub)
    assert {"serve", "worker", "beat"} <= checked, f"expected serve, worker and beat; saw {checked}"


def test_celery_app_paths_import(services: dict[str, dict[str, Any]], dockerfile: str) -> None:
    from celery import Celery

    paths = set()
    for _, argv in _all_argvs(services, dockerfile):
        for args in _invocations(argv, "celery"):
            paths.update(_option_values(args, "-A", "--app"))
    assert "memoryd.workers.celery_app:app" in paths, f"celery app paths used: {paths}"
    for path in paths:
        module, _, attr = path.partition(":")
        try:
            app = getattr(importlib.import_module(module), attr or "app")
        except (ImportError, AttributeError) as exc:
            pytest.fail(f"celery app {path!r} does not import: {exc!r}")
        assert isinstance(app, Celery), f"{path} is not a Celery app"


def test_workers_consume_every_queue(services: dict[str, dict[str, Any]]) -> None:
    from memoryd.jobs.names import QueueName

    known = {queue.value for queue in QueueName}
    consumed: set[str] = set()
    for name, service in services.items():
        for args in _invocations(_argv(service.get("command")), "memoryd"):
            if args[:1] == ["worker"]:
                for value in _option_values(args, "--queues", "-Q"):
                    queues = {q.strip() for q in value.split(",") if q.strip()}
                    assert queues <= known, f"{name}: unknown queues {queues - known}"
                    consumed |= queues
    assert consumed == known, f"no worker consumes {sorted(known - consumed)}"


def test_memoryd_environment_variables_are_settings(services: dict[str, dict[str, Any]]) -> None:
    from memoryd.platform.settings import Settings

    fields = {f"MEMORYD_{name.upper()}" for name in Settings.model_fields}
    for name, service in services.items():
        unknown = {key for key in _environment(service) if key.startswith("MEMORYD_")} - fields
        assert not unknown, f"{name}: {sorted(unknown)} are not memoryd settings"


# ---- service policy ----------------------------------------------------------------


def test_every_service_restarts(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, (
            f"{name}: no restart policy"
        )


def test_healthy_dependencies_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        depends_on = service.get("depends_on") or {}
        assert isinstance(depends_on, dict), f"{name}: depends_on must state conditions"
        for dependency, spec in depends_on.items():
            assert dependency in services, f"{name}: depends on unknown service {dependency}"
            if spec.get("condition") == "service_healthy":
                assert services[dependency].get("healthcheck"), (
                    f"{name} waits for {dependency} to be healthy, which has no healthcheck"
                )


def test_healthchecks_need_no_curl_or_wget(services: dict[str, dict[str, Any]]) -> None:
    # Neither python:*-slim nor qdrant/qdrant ships curl or wget.
    for name, service in services.items():
        argv = _healthcheck_argv(service)
        for tool in ("curl", "wget"):
            assert not any(Path(token).name == tool for token in argv), (
                f"{name}: the healthcheck uses {tool}"
            )


def test_redis_is_durable(services: dict[str, dict[str, Any]]) -> None:
    argv = _argv(services["redis"].get("command"))
    assert _option_values(argv, "--appendonly") == ["yes"], f"redis runs without AOF: {argv}"
    assert services["redis"].get("volumes"), "redis keeps its AOF in a volume"
    assert services["qdrant"].get("volumes"), "qdrant keeps its storage in a volume"


def test_gateway_healthcheck_hits_readyz(services: dict[str, dict[str, Any]]) -> None:
    gateway = services["gateway"]
    argv = _healthcheck_argv(gateway)
    assert argv, "the gateway has no healthcheck"
    assert any("/readyz" in token for token in argv), f"gateway healthcheck: {argv}"
    ports = [_interpolate_defaults(str(p)) for p in gateway.get("ports", [])]
    assert any(p.endswith(":8420") for p in ports), f"port 8420: {ports}"


def test_worker_can_scale(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker, "a fixed container_name prevents --scale worker=N"
    assert not worker.get("ports"), "published ports prevent --scale worker=N"
    assert worker.get("healthcheck"), "the worker has no healthcheck"


def test_bulk_work_yields_the_cores_to_the_writes_and_reads(
    services: dict[str, dict[str, Any]],
) -> None:
    """Issue 31, item 11: a flood's overflow runs on the bulk service; under contention it
    must not take the cores a save or a search needs (Docker's default weight is 1024)."""
    default = 1024
    bulk = int(services["bulk"].get("cpu_shares", default))
    for name in ("gateway", "worker"):
        assert bulk * 4 <= int(services[name].get("cpu_shares", default)), name


def test_flower_is_installed_and_protected(
    services: dict[str, dict[str, Any]], dockerfile: str
) -> None:
    flower = services["flower"]
    assert any(_invocations(_argv(flower.get("command")), "celery")), "flower runs via celery"
    env = _environment(flower)
    assert env.get("FLOWER_BASIC_AUTH") or any(
        "--basic_auth" in arg or "--basic-auth" in arg for arg in _argv(flower.get("command"))
    ), "flower runs without basic auth"
    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    assert "flower==" in dockerfile or any(d.startswith("flower") for d in deps), (
        "nothing installs flower in the image"
    )


# ---- the Dockerfile -------------------------------------------------------------------


def test_dockerfile_is_multi_stage_pinned_and_non_root(dockerfile: str) -> None:
    instructions = dockerfile_instructions(dockerfile)
    froms = [rest.split() for word, rest in instructions if word == "FROM"]
    assert len(froms) > 1, "ops/Dockerfile must be multi-stage"
    stages = {parts[-1].lower() for parts in froms if len(parts) >= 3 and parts[-2].upper() == "AS"}
    for parts in froms:
        image = next(part for part in parts if not part.startswith("--"))
        if image.lower() in stages:
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and tag != "latest" and PINNED_TAG.match(tag), f"unpinned base {image!r}"

    last_stage = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    users = [rest for word, rest in instructions[last_stage:] if word == "USER"]
    assert users, "the final stage sets no USER"
    assert users[-1].split(":")[0] not in {"root", "0"}, f"final USER is {users[-1]!r}"

    final = instructions[last_stage:]
    assert ("EXPOSE", "8420") in final, "the final stage does not EXPOSE 8420"
    assert any(word == "COPY" and "--from=" in rest for word, rest in final), (
        "the final stage copies nothing from the builder"
    )


def test_dockerfile_copies_files_that_exist(dockerfile: str) -> None:
    for source in copied_sources(dockerfile):
        if "*" in source or "?" in source:
            continue  # wildcards may match nothing
        assert (ROOT / source).exists(), f"ops/Dockerfile copies missing {source!r}"


def test_dockerignore_keeps_the_context_small() -> None:
    assert DOCKERIGNORE.is_file(), ".dockerignore is missing"
    patterns = {line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()}
    for required in (".git", ".venv"):
        assert required in patterns, f".dockerignore does not exclude {required}"
    for needed in ("pyproject.toml", "api", "workers", "shared", "README.md", "LICENSE", "NOTICE"):
        assert needed not in patterns, f".dockerignore excludes {needed}, which the build needs"


# ---- exposure --------------------------------------------------------------------------


def _published(service: dict[str, Any]) -> list[str]:
    """Each published port as compose resolves it with no variable set (short syntax)."""
    return [_interpolate_defaults(str(p)) for p in service.get("ports") or []]


def test_stores_publish_no_port(services: dict[str, dict[str, Any]]) -> None:
    """Redis and Qdrant stay on the compose network: nothing on the host reaches them."""
    for name in ("redis", "qdrant"):
        assert not services[name].get("ports"), f"{name} publishes {services[name]['ports']}"
        assert services[name].get("network_mode") != "host", f"{name} uses the host network"


def test_published_ports_are_loopback_unless_configured(
    services: dict[str, dict[str, Any]]
) -> None:
    """Every published port names its host address, 127.0.0.1 unless a variable says
    otherwise (the gateway, Flower): never all interfaces by default."""
    seen = set()
    for name, service in services.items():
        for port in _published(service):
            host, _, rest = port.partition(":")
            assert host == "127.0.0.1" and rest, f"{name} publishes {port!r} beyond loopback"
            seen.add(name)
        for port in service.get("ports") or []:
            if "${" in str(port):
                assert re.match(r"^\$\{[A-Z_]+:-127\.0\.0\.1\}:", str(port)), port
    assert {"gateway", "flower"} <= seen


def test_metrics_need_a_token_and_prometheus_sends_it(
    services: dict[str, dict[str, Any]]
) -> None:
    env = _environment(services["gateway"])
    assert "MEMORYD_METRICS_TOKEN" in env
    assert _interpolate_defaults(env.get("MEMORYD_METRICS_OPEN") or "false") == "false"
    assert "MEMORYD_OPERATOR_KEYS" in env and "MEMORYD_REINDEX_EMBEDDERS" in env
    config = yaml.safe_load((ROOT / "ops" / "prometheus.yml").read_text(encoding="utf-8"))
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "memoryd")
    auth = job["authorization"]
    assert auth["type"] == "Bearer" and "credentials" not in auth
    prometheus = services["prometheus"]
    script = " ".join(_argv(prometheus.get("command")))
    assert auth["credentials_file"] in script and "MEMORYD_METRICS_TOKEN" in script
    assert "MEMORYD_METRICS_TOKEN" in _environment(prometheus)
    assert "--config.file=/etc/prometheus/prometheus.yml" in script
