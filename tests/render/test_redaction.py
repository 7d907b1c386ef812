"""Issue 10: the startup script's logs and report never carry a URL's query string or user:password
(tv_retry / tv_fail redact through tv_redact). Run under the stub harness with a failing download."""

from __future__ import annotations

import json

import trainvm_render_support as S

QUERY = "alt=media&generation=1712345"
URL = f"https://data.example.com/glue.tar?{QUERY}"


def test_failed_download_logs_and_report_have_no_query_string(make_harness, tmp_path):
    doc = json.loads(json.dumps(S.minimal_profile()))
    doc["data"] = [{"source": URL, "dest": "/mnt/data/glue"}]
    lp = S.from_dict(doc)
    h = make_harness(S.render(lp, "gcp").startup_sh, STUB_CURL_FAIL="data.example.com", TRAINVM_RETRY_SLEEP="0")
    run = h.run()
    assert run.rc != 0 and run.status and run.status.startswith("failed")
    logs = "".join(p.read_text(errors="replace") for p in h.path("/var/log/trainvm").rglob("*") if p.is_file())
    report = h.path("/var/lib/trainvm/report.json").read_text()
    for text in (run.output, logs, report):
        assert QUERY not in text
    assert "data.example.com/glue.tar?***" in run.output  # what failed is still named
    assert "data.example.com" in json.loads(report)["error"]


def test_tv_redact_removes_userinfo_and_query(make_harness):
    script = S.render(S.loaded(S.GOLDEN_PROFILE), "gcp").startup_sh
    start = script.index("tv_redact() {")
    func = script[start:script.index("\n}\n", start) + 3]
    import subprocess

    out = subprocess.run(["bash", "-c", func + 'tv_redact "curl https://u:pw@h.example/a?sig=x&t=1 -o f; git clone ssh://git@h/r"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "curl https://***@h.example/a?*** -o f; git clone ssh://***@h/r"
