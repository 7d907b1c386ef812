"""Issue 10: the startup scripts call no cloud CLI for data or secrets (gcloud, the AWS CLI and azcopy are not
on AWS or Azure images). Every bundled profile on every cloud and OS, with its data where that cloud reads it
natively and with a cross-cloud source read through a credential from that cloud's own secret store: the
rendered script (as the VM runs it) names none of them, the AWS lifecycle script (trainvm-lifecycle, idle/max-run)
included: its EC2 call is the helper's (`trainvm_helper.py ec2 terminate`, boto3 of the s3 tool's venv)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import trainvm_render_support as S

from provisioner.profile.model import DataItem

BUNDLED = S.EXAMPLES + sorted((S.REPO / "profiles/base").glob("*.yaml"))
OWN_STORE = {"gcp": "secret://gcp/reader", "azure": "secret://azure-keyvault/vault1/reader", "aws": "secret://aws/reader"}
FOREIGN = {"gcp": "s3://other-bkt/x/", "azure": "gs://other-bkt/x/", "aws": "az://acct1/cont/x/"}
CLI = re.compile(r"(?<![\w./-])(gcloud|gsutil|azcopy|aws)\s")


@pytest.mark.parametrize("cloud", S.CLOUDS)
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_rendered_scripts_call_no_cloud_cli(path, cloud):
    lp = S.data_native_to(S.loaded(path), cloud)
    extra = DataItem(source=FOREIGN[cloud], dest="/mnt/data/extra", credential=OWN_STORE[cloud])
    profile = lp.profile.model_copy(update={"data": [*lp.profile.data, extra]})
    lp = dataclasses.replace(lp, profile=profile)
    for os_name in S.OS_NAMES:
        rendered = S.render(S.with_os(lp, os_name), cloud)
        script = rendered.startup_sh
        assert "trainvm_copy.py" in script and "tv_datatool_lock" in script  # the copier is there
        script += rendered.preview().text  # and the bootstrap in user data
        found = CLI.findall(script)
        assert not found, f"{path.stem} on {cloud}/{os_name}: {found}"
