"""The interpreter of a stub venv: the real Python, isolated (-S) to the venv's site-packages,
reporting the version `uv python install` was asked for (sys.version is patched)."""
import os
import runpy
import sys

venv, args = sys.argv[1], sys.argv[2:]
with open(os.path.join(venv, ".stub-python-version"), encoding="utf-8") as fh:
    wanted = fh.read().strip()
sys.version = wanted + sys.version[sys.version.index(" "):]
sys.prefix = sys.exec_prefix = venv
sys.path.insert(0, os.path.join(venv, "lib", "site-packages"))
if args[:1] == ["-c"]:
    sys.argv = ["-c"] + args[2:]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
elif args and args[0] != "-":
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
    runpy.run_path(args[0], run_name="__main__")
else:
    sys.argv = ["-"] + args[1:]
    exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__"})
