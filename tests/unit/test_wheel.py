"""The wheel ships templates/, profiles/ and the data files, and finds them once installed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.helpers import REPO


def test_wheel_contains_resources_and_they_are_found(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)], cwd=REPO, check=True, capture_output=True)
    wheel = next(out.glob("trainvm-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("provisioner/templates/startup.sh.j2", "provisioner/profiles/examples/bert-finetune-t4.yaml",
                   "provisioner/profiles/base/torch-2.4-cu124.yaml", "provisioner/compat/data/torch.yaml",
                   "provisioner/catalog/data/catalog.json", "provisioner/catalog/data/gcp.csv"):
        assert needed in names, needed
    assert not any(n.startswith("tests/") for n in names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import provisioner.bundled as r, provisioner\n"
        "from provisioner.profile import load_profile\n"
        "assert str(r.templates_dir()).startswith(%r), r.templates_dir()\n"
        "lp = load_profile(r.profiles_dir() / 'examples' / 'bert-finetune-t4.yaml')\n"
        "from provisioner.render.script import render_for_offer\n"
        "from provisioner.planner.from_profile import make_plan\n"
        "plan = make_plan(lp).plan\n"
        "print(len(render_for_offer(lp, plan.chosen).startup_sh))\n"
    ) % str(site)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "TRAINVM_NO_CACHE": "1"}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip()) > 1000
