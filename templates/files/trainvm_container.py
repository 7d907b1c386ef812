#!/usr/bin/env python3
# trainvm container helper (stdlib only), written beside trainvm_helper.py for container stacks:
#   stack-probe              (inside the container) TRAINVM_STACK=<JSON: Python, packages, framework>
#   container-check DIGESTS  (host) the probe's JSON on stdin: a framework that sees the GPU;
#                            saved as stack.json with the image and its digest for the report
#   report ST, anything else trainvm_helper.py's commands; the report gets "container"
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trainvm_helper as h  # noqa: E402


def container_check(digests):
    want = (h.load("expected.json") or {}).get("container") or {}
    try:
        stack = json.loads(sys.stdin.read() or "null")
    except ValueError:
        stack = None
    if not isinstance(stack, dict):
        print("MISMATCH the check run printed no stack probe (does the image have python3?)")
        return 1
    problems, fw = [], stack.get("framework")
    if not fw:
        problems.append("no CUDA framework (torch, tensorflow, jax) is installed in the image")
    elif fw.get("error"):
        problems.append("%s does not import: %s" % (fw["name"], fw["error"]))
    elif not fw.get("cuda_available"):
        problems.append("%s %s sees no GPU inside the container (cuda available: false)" % (fw["name"], fw["version"]))
    digest = want.get("digest")
    pulled = digest if digest and any(d.endswith("@" + digest) for d in digests.split()) else None
    stack["container"] = {"image": want.get("image"), "digest": pulled, "repo_digests": digests.split()}
    h.save("stack.json", stack)
    for p in problems:
        print("MISMATCH " + p)
    if not problems:
        print("container %s: %s %s, CUDA %s, cuDNN %s" % (want.get("image"), fw["name"], fw["version"], fw.get("cuda"), h.cudnn_text(fw.get("cudnn"))))
    return 1 if problems else 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "stack-probe":
        print("TRAINVM_STACK=" + json.dumps(h.stack_probe(), sort_keys=True))
        return 0
    if cmd == "container-check":
        return container_check(argv[2] if len(argv) > 2 else "")
    if cmd != "report":
        return h.main(argv)
    import io

    real, sys.stdout = sys.stdout, io.StringIO()
    try:
        rc = h.main(argv)
        text = sys.stdout.getvalue()
    finally:
        sys.stdout = real
    report = json.loads(text)
    report["container"] = (h.load("stack.json") or {}).get("container")
    json.dump(report, sys.stdout, sort_keys=True)
    print()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
