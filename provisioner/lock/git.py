"""The few git operations team sources need, through the ``git`` command: no shell, bounded by a
timeout, never prompting (``GIT_TERMINAL_PROMPT=0``), with the user's global/system config ignored
so a URL rewrite or hook there cannot change what is fetched.

Each source URL has one bare repository in the cache (``~/.cache/trainvm/sources/<sha>/repo.git``)
holding its branches (as ``refs/remotes/origin/*``) and tags; each commit used is extracted once into
``trees/<commit>/`` (files only; links and special files are skipped)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from provisioner.cache import cache_dir
from provisioner.errors import InputError, TrainvmError

GIT_TIMEOUT_S = 120.0
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


class SourceError(TrainvmError):
    """A team source cannot be fetched or does not have what the lock or the project file names: exit 1."""

    exit_code = 1


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_ASKPASS="true", LC_ALL="C")
    return env


def git(args: list[str], *, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    argv = ["git", *args]
    try:
        done = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SourceError("`git` is not installed; team profile sources need it") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"`git {args[0]}` took over {timeout:.0f}s") from None
    if check and done.returncode != 0:
        msg = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SourceError(f"`git {args[0]}` failed: {msg[-1] if msg else 'exit ' + str(done.returncode)}")
    return done


def sources_cache() -> Path:
    return cache_dir() / "sources"


class Checkout:
    """The cached bare clone of one source URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.root = sources_cache() / hashlib.sha256(url.encode()).hexdigest()[:20]
        self.repo = self.root / "repo.git"

    def exists(self) -> bool:
        return (self.repo / "HEAD").is_file()

    def fetch(self) -> None:
        if not self.exists():
            self.repo.mkdir(parents=True, exist_ok=True)
            git(["init", "--bare", "-q", str(self.repo)])
        git(["-C", str(self.repo), "fetch", "--quiet", "--prune", "--no-write-fetch-head", "--", self.url,
             "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"])

    def resolve(self, ref: str) -> str | None:
        """The commit ``ref`` names in the cache (tag, then branch, then a commit id), or None."""
        if not self.exists():
            return None
        candidates = [f"refs/tags/{ref}", f"refs/remotes/origin/{ref}"]
        if re.fullmatch(r"[0-9a-f]{7,40}", ref):
            candidates.append(ref)
        for cand in candidates:
            done = git(["-C", str(self.repo), "rev-parse", "--verify", "-q", "--end-of-options", f"{cand}^{{commit}}"], check=False)
            out = done.stdout.decode().strip()
            if done.returncode == 0 and _HEX40.match(out):
                return out
        return None

    def has_commit(self, commit: str) -> bool:
        return self.resolve(commit) == commit

    def tree(self, commit: str) -> Path:
        """The files of ``commit``, extracted once under ``trees/<commit>``."""
        if not _HEX40.match(commit):
            raise InputError(f"{commit!r} is not a full commit id")
        dest = self.root / "trees" / commit
        if (dest / ".trainvm-complete").is_file():
            return dest
        done = git(["-C", str(self.repo), "archive", "--format=tar", commit])
        tmp = dest.with_name(commit + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tf:
            members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
            tf.extractall(tmp, members=members, filter="data")
        (tmp / ".trainvm-complete").write_text(commit + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        return dest
