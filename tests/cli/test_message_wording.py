"""Issue 36 item 24: messages in human words -- no Python type names or HTML pages, durations and counts written
properly, a VM's whole name, the right hint, `list`'s partial answer said."""

from __future__ import annotations

import dataclasses

import pytest

from provisioner.errors import RetryExhaustedError
from provisioner.providers.base import InstanceRecord
from provisioner.wording import duration, failure_words, plural, without_html

HTML_503 = "<!doctype html>\n<html><head><title>503 Service Unavailable</title></head><body>upstream down</body></html>"


@pytest.mark.parametrize(("seconds", "words"), [(0, "0 s"), (59.6, "1 min"), (1820, "30 min 20 s"), (30.3333 * 60, "30 min 20 s"),
                                                (5400, "1 h 30 min"), (3 * 86400 + 4 * 3600, "3 days 4 h"), (86400, "1 day")])
def test_durations_are_written_in_units_not_fractions(seconds, words) -> None:
    assert duration(seconds) == words


def test_counts_take_their_plural() -> None:
    assert (plural(1, "image"), plural(2, "image"), plural(0, "image")) == ("1 image", "2 images", "0 images")


def test_an_html_page_is_named_not_printed_and_no_type_name_is_said() -> None:
    assert without_html(f"HTTP 503 after 3 tries: {HTML_503}") == (
        "HTTP 503 after 3 tries: an HTML page (503 Service Unavailable) instead of an API answer")
    err = RetryExhaustedError(f"HTTP 503 after 3 tries: {HTML_503}", code="503")
    assert "<!doctype" not in str(err) and "503 Service Unavailable" in str(err)
    words = failure_words(RetryExhaustedError(HTML_503))
    assert "RetryExhaustedError" not in words and "<" not in words and words.startswith("an HTML page")
    assert failure_words(TimeoutError()) == "timed out"


def test_a_failed_quota_read_says_why_without_a_type_name(monkeypatch) -> None:
    from provisioner.catalog.storage import load_catalog
    from provisioner.provision import quota as Q

    class Source:
        cloud, account, source, increase_hint = "gcp", "p", "GCE regions.get", "ask"

        def read(self, scope):
            raise RetryExhaustedError(f"HTTP 503 after 3 tries: {HTML_503}")

        def needs(self, offer, spot, nodes, usage_of):
            return [Q.QuotaNeed("NVIDIA_T4_GPUS", offer.region, 1, "T4 GPUs")]

    monkeypatch.setenv("TRAINVM_NO_CACHE", "1")
    monkeypatch.setattr(Q, "quota_source", lambda cloud, provider: Source())
    offer = next(o for o in load_catalog().offers if o.cloud == "gcp")
    check = Q.Preflight(providers={"gcp": object()}, spot=False, nodes=1).check(offer)  # type: ignore[dict-item]
    assert check.status == "unknown"
    assert "RetryExhaustedError" not in check.message() and "<!doctype" not in check.message()
    assert "the quota read failed: HTTP 503 after 3 tries: an HTML page (503 Service Unavailable)" in check.message()


def test_network_failures_are_not_named_by_their_python_type() -> None:
    from provisioner.providers.gcp.errors import Failure, classify

    err = classify(Failure(None, "ConnectionError", "connection refused", kind="network"), retried=3)
    assert str(err).startswith("network error after 3 tries: connection refused"), str(err)
    assert err.code == "ConnectionError"  # the JSON code keeps what the SDK said


def test_aws_did_not_answer_without_the_botocore_type_name() -> None:
    from botocore.exceptions import EndpointConnectionError

    from provisioner.providers.aws.errors import classify

    err = classify(EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"), attempts=3)
    assert "EndpointConnectionError" not in str(err) and "Could not connect to the endpoint URL" in str(err)


def test_status_shows_a_vms_whole_name(cli, clouds) -> None:
    name = "trainvm-a-rather-long-profile-name-for-a-team-experiment-abcdef"  # 63 characters: the longest name
    assert len(name) == 63
    clouds["azure"].vms[name] = InstanceRecord(name, "azure", "eastus", None, "Standard_NC4as_T4_v3", "running", "x", "abc",
                                               None, "2026-11-21T00:00:00Z", spot=False, last_start="2026-11-21T00:00:00Z")
    r = cli("status")
    assert r.code == 0 and name in r.out, r.out


def test_render_for_a_cloud_the_profile_lists_hints_at_cloud_not_at_placement(cli, write_yaml) -> None:
    """`render P --cloud azure` for a profile with placement.clouds [gcp, azure] and no Azure L4: the nearest offer
    is on gcp, which the profile already lists -- the hint is --cloud gcp, not "add gcp to placement.clouds"."""
    doc = {"name": "l4", "hardware": {"gpu": "L4"},
           "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "python": "3.11.9", "packages": ["numpy==2.0.0"]},
           "placement": {"clouds": ["gcp", "azure"]}}
    r = cli("render", str(write_yaml(doc)), "--cloud", "azure")
    assert r.code == 1 and "no feasible offer" in r.err
    assert "add gcp to placement.clouds" not in r.err and "--cloud gcp (placement.clouds lists it" in r.err, r.err
    doc["placement"]["clouds"] = ["azure"]
    r = cli("plan", str(write_yaml(doc, name="azure-only.yaml")))
    assert r.code == 1 and "add gcp to placement.clouds" in r.out  # not listed: the profile is what to change


def test_list_with_a_zone_not_listed_says_it_is_partial_and_exits_3(cli, clouds, monkeypatch) -> None:
    """A zone (GCE) or region (AWS) that did not answer: the VMs found are shown, the answer is called incomplete
    and names what was not listed, exit 3 (docs/spec.md) -- not exit 0 with only a warning."""
    gcp = clouds["gcp"]
    monkeypatch.setattr(gcp, "list_partial", lambda: (gcp.list(), ["us-central1-b"]), raising=False)
    clouds["azure"].vms["trainvm-x-1"] = InstanceRecord("trainvm-x-1", "azure", "eastus", None, "Standard_NC4as_T4_v3",
                                                        "running", "x", "abc", None, "2026-11-21T00:00:00Z", spot=False)
    r = cli("list")
    assert r.code == 3 and "trainvm-x-1" in r.out, (r.out, r.err)
    assert "this list is incomplete: not listed: gcp us-central1-b (did not answer)" in " ".join(r.err.split())
    doc = cli("list", "--json")
    assert doc.code == 3 and doc.json()["partial"] is True
    assert doc.json()["unlisted"] == [{"cloud": "gcp", "where": ["us-central1-b"], "reason": "did not answer"}]
    monkeypatch.setattr(gcp, "list_partial", lambda: (gcp.list(), []), raising=False)
    whole = cli("list", "--json")
    assert whole.code == 0 and whole.json()["partial"] is False


@pytest.mark.parametrize("found_as", ["STOPPING", "RUNNING"])
def test_stop_under_a_503_storm_says_the_vm_is_already_stopping(cli, clouds, monkeypatch, found_as) -> None:
    """The stop (or the wait for an earlier one) fails with 503 after its retries, on a VM the cloud says is
    STOPPING -- when it was found, or read again after the failure: the error says so, not only "HTTP 503"."""
    gcp = clouds["gcp"]
    name = "trainvm-storm-1"
    gcp.vms[name] = InstanceRecord(name, "gcp", "us-central1", "us-central1-a", "n1-standard-8", found_as, "x", "abc",
                                   None, "2026-11-21T00:00:00Z", spot=False)

    def storm(name, *, wait=True):
        gcp.vms[name] = dataclasses.replace(gcp.vms[name], state="STOPPING")  # the stop got through, its answer did not
        raise RetryExhaustedError("HTTP 503 after 4 tries: Service Unavailable", code="503")

    monkeypatch.setattr(gcp, "stop", storm)
    r = cli("stop", name, "--yes")
    assert r.code == 3, (r.out, r.err)
    said = " ".join(r.err.split())
    assert f"{name} is already STOPPING (gcp said so" in said and "HTTP 503 after 4 tries" in said, said
    assert f"`trainvm status {name}` shows when it has stopped" in said
