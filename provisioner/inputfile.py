"""Reading a user's input file (a profile, a lock file) safely: it must be a regular file no larger than a
cap, checked with ``fstat`` before anything is read, and the read itself is bounded. A FIFO, a device
(``/dev/zero``, ``/dev/urandom``), a directory, a symlink loop or a (sparse) multi-GiB file is a clear
input error instead of a hang or an out-of-memory. Opened with O_NONBLOCK so that opening a FIFO does not
wait for a writer."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from provisioner.errors import InputError

MAX_PROFILE_BYTES = 256 * 1024  # the bundled profiles are < 2 KiB; cloud user data holds far less anyway
KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``cap`` bytes; InputError (exit 2) otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}") from None
    except OSError as exc:
        reason = {errno.ELOOP: "a symlink loop (too many levels of symbolic links)",
                  errno.ENAMETOOLONG: "the path is too long", errno.EISDIR: f"is a directory, not a {what}"}.get(
            exc.errno or 0, f"cannot read: {exc.strerror or exc}")
        raise InputError(f"{path}: {reason}") from None
    try:
        st = os.fstat(fd)
        for test, kind in KINDS:
            if test(st.st_mode):
                raise InputError(f"{path}: is {kind}, not a regular file; a {what} must be a regular file")
        if st.st_size > cap:
            raise InputError(f"{path}: is {st.st_size} bytes; a {what} may be at most {cap} bytes")
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 16, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise InputError(f"{path}: grew past {cap} bytes while being read; a {what} may be at most {cap} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
