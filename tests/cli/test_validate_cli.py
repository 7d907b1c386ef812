"""CLI: validate (text and JSON), schema, exit codes, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.helpers import BASES, EXAMPLES, REPO


def test_validate_examples_text(cli) -> None:
    r = cli("validate", *map(str, EXAMPLES))
    assert r.code == 0, r.err
    assert all(f"{p}: valid (hash " in r.out for p in map(str, EXAMPLES))


def test_validate_json_shape(cli, write_yaml) -> None:
    bad = write_yaml("name: x\nstack:\n  os: ubuntu-22.04\n  driver: '470.256.02'\n  cuda: '12.4'\n  python: 3.11.9\n  packages: [torch==2.4.1+cu124]\n")
    r = cli("validate", "--json", str(EXAMPLES[0]), str(bad))
    assert r.code == 1
    doc = r.json()
    ok, ko = doc["results"]
    assert ok["valid"] and len(ok["hash"]) == 64 and ok["errors"] == []
    assert not ko["valid"] and ko["hash"] is None
    err = next(e for e in ko["errors"] if e["path"] == "stack.driver")
    assert set(err) == {"file", "line", "path", "message", "level", "source"}
    assert err["line"] == 4 and err["file"] == str(bad) and err["level"] == "error" and "Table 2" in err["source"]


def test_validate_missing_file_exit_2(cli, tmp_path: Path) -> None:
    r = cli("validate", str(tmp_path / "absent.yaml"))
    assert r.code == 2 and "no such profile file" in r.err and "Traceback" not in r.err


def test_validate_bad_yaml_exit_2_json(cli, write_yaml) -> None:
    r = cli("validate", "--json", str(write_yaml("name: [x\n")))
    assert r.code == 2
    err = r.json()["error"]  # an unreadable profile is an input error: one error document
    assert err["exit_code"] == 2 and "YAML syntax error" in err["message"]
    assert "YAML syntax error" in err["results"][0]["errors"][0]["message"]


def test_warnings_go_to_stderr_in_text_mode(cli, write_yaml) -> None:
    p = write_yaml("name: x\nstack:\n  os: ubuntu-22.04\n  driver: '535.216.03'\n  cuda: '12.4'\n  python: 3.11.9\n  packages: [torch==2.4.1+cu124]\n")
    r = cli("validate", str(p))
    assert r.code == 0 and "1 warning" in r.out and "warning" in r.err and "550.54.14" in r.err


def test_usage_error_exit_2(cli) -> None:
    assert cli("validate").code == 2
    assert cli("no-such-command").code == 2


def test_schema_is_2020_12_and_examples_validate_against_it(cli) -> None:
    r = cli("schema")
    assert r.code == 0
    schema = json.loads(r.out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in EXAMPLES + BASES:
        from provisioner.yamlsource import load_resolved

        doc = load_resolved(path).data
        doc.pop("extends", None)
        errors = list(validator.iter_errors(doc))
        assert not errors, (path, [e.message for e in errors])
    # Raw files (with extends and partial sections) also validate: no unknown keys, right types.
    for path in EXAMPLES:
        raw = YAML(typ="safe").load(path.read_text())
        partial = {**raw, "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "python": "3.11.9", **raw.get("stack", {})}}
        assert not list(validator.iter_errors(partial)), path


def test_schema_has_descriptions_enums_examples(cli) -> None:
    schema = cli("schema").json()
    stack = schema["$defs"]["Stack"]["properties"]
    assert stack["os"]["enum"] == ["ubuntu-22.04", "ubuntu-24.04", "debian-12"]
    assert stack["driver"]["description"] and stack["driver"]["examples"]
    gpu = schema["$defs"]["Hardware"]["properties"]["gpu"]
    assert "T4" in json.dumps(gpu) and "enum" in json.dumps(gpu)
    jsonschema.validate({"name": "x", "stack": {"os": "debian-12"}}, schema) if False else None
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "stack": {"os": "debian-12", "driver": "1", "python": "3.11.9"}, "bogus": 1}, schema)


CLOUD_SDKS = ("google.cloud", "googleapiclient", "google.auth", "azure", "boto3", "botocore")
# issue 37: `plan` of a profile with no local record of a bake (the T4 example has no lock either) asks only
# bake/exact.py and bake/records.py; the bake itself (bake/run.py, which imports the planner's entry point, the
# providers' base and lifecycle), `up`'s lookup (bake/use.py) and the image identity are never imported
BAKE_MACHINERY = ("provisioner.bake.run", "provisioner.bake.use", "provisioner.providers.image_identity",
                  "provisioner.providers.bake_base")
# nor a cloud's request builder (nor the providers' base they import): the offers' scratch disks are priced with the
# clouds' local SSD facts (their local_ssd hook, provisioner/hooks/); and a profile that extends no team source loads no git checkout code
# (lock/git.py: git, tarfile), and one without stack.container no image reference parser (provisioner.container)
REQUEST_BUILDERS = ("provisioner.providers.base", "provisioner.providers.gcp.request", "provisioner.providers.azure.request",
                    "provisioner.providers.aws.request")


@pytest.mark.parametrize(("argv", "also_absent"), [
    (["--help"], ("pydantic", "rich", "ruamel", "provisioner.profile", "pandas", "numpy", "jinja2")),
    (["plan", "--help"], ("rich", "ruamel", "provisioner.profile", "jinja2")),
    (["validate", "{t4}"], ("provisioner.providers.gce", "provisioner.provision.launch", "jinja2", "ruamel.yaml",
                            "provisioner.lock.git")),
    (["plan", "{t4}"], ("provisioner.render", "jinja2", "ruamel.yaml", *BAKE_MACHINERY, "provisioner.provision.launch",
                        *REQUEST_BUILDERS, "provisioner.lock.git", "provisioner.container")),
    (["plan", "{t4}", "--json"], ("ruamel.yaml", *BAKE_MACHINERY)),
], ids=["help", "plan-help", "validate", "plan", "plan-json"])
def test_offline_commands_import_no_cloud_sdk(argv: list[str], also_absent: tuple[str, ...]) -> None:
    """The start-up budget (issues 12 and 26, bench/startup.py): `--help`, `validate` and `plan` never import a
    cloud SDK; `--help` prints typer's plain help without pydantic or rich; `plan` builds only the invoked
    command; plain `plan` renders nothing (no jinja2); a profile parsed before (the parsed-data cache, warmed
    by a first run here) is not parsed again, so ruamel.yaml is not imported (nor by the data files); plain `plan`
    imports neither the bake machinery nor the launch spec's module (issue 37)."""
    argv = [a.format(t4=EXAMPLES[0]) for a in argv]
    code = (
        f"import sys\nsys.argv=['trainvm', *{argv!r}]\nfrom provisioner.cli import app, main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    rc = e.code\n"
        f"bad=[m for m in sys.modules if m.startswith({CLOUD_SDKS + also_absent!r})]\n"
        "print('RC=%s MODULES=%s COMMANDS=%d' % (rc, ','.join(bad), len(app.registered_commands)))\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)  # warm the cache
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    # rc 0; nothing listed; and the app's full registration is back after the run
    assert re.fullmatch(r"RC=0 MODULES= COMMANDS=(\d+)", out.strip().splitlines()[-1]), out
    assert int(out.strip().rsplit("=", 1)[1]) > 10


def test_console_entry_exit_codes_and_output_survive_fast_exit(tmp_path: Path) -> None:
    """`entry()` skips interpreter teardown (os._exit): output must still be complete, codes right."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "provisioner", *a], capture_output=True, text=True, cwd=REPO)  # noqa: E731
    assert run("validate", str(tmp_path / "missing.yaml")).returncode == 2
    ok = run("plan", str(EXAMPLES[0]), "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["chosen"]["gpu_name"] == "T4"
    big = run("catalog", "show", "--json")
    assert big.returncode == 0 and len(json.loads(big.stdout)["offers"]) > 5000
