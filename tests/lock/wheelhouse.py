"""A package index the lock tests build: tiny wheels (with dependencies) and an sdist-only package,
laid out as a PEP 503 simple index in a temp folder and served over http on 127.0.0.1, so real
``uv`` resolves, hashes and installs with no network.

What it does not model: PEP 691 JSON pages, yanking, upload times, ``data-requires-python``
(every wheel here is ``py3-none-any`` or a cp311 manylinux tag that the tests choose).
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import io
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import canonicalize_name


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), tag: str = "py3-none-any") -> Path:
    """Write a minimal valid wheel with one module and ``Requires-Dist`` lines; return its path."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = "\n".join(["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *[f"Requires-Dist: {r}" for r in requires]]) + "\n"
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: trainvm-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    files = {f"{dist}/__init__.py": f"__version__ = {version!r}\n".encode(), f"{info}/METADATA": meta.encode(), f"{info}/WHEEL": wheel_meta.encode()}
    record = [_record_line(k, v) for k, v in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in files.items():
            info_z = zipfile.ZipInfo(k, date_time=(2024, 1, 1, 0, 0, 0))
            zf.writestr(info_z, v)
    return path


def build_sdist(folder: Path, name: str, version: str) -> Path:
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}.tar.gz"
    pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    with tarfile.open(path, "w:gz") as tf:
        for rel, data in ((f"{dist}-{version}/PKG-INFO", pkg_info), (f"{dist}-{version}/setup.py", b"raise SystemExit('no builds here')\n")):
            ti = tarfile.TarInfo(rel)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return path


def write_simple_index(files: Path, root: Path) -> None:
    """PEP 503 pages for every file in ``files`` under ``root/simple/<name>/``, with sha256 fragments."""
    by_name: dict[str, list[Path]] = {}
    for f in sorted(files.iterdir()):
        stem = f.name.split("-")[0]
        by_name.setdefault(str(canonicalize_name(stem)), []).append(f)
    simple = root / "simple"
    simple.mkdir(parents=True, exist_ok=True)
    links = []
    for name, dists in by_name.items():
        (simple / name).mkdir(exist_ok=True)
        rows = [f'<a href="../../files/{html.escape(d.name)}#sha256={hashlib.sha256(d.read_bytes()).hexdigest()}">{html.escape(d.name)}</a><br/>' for d in dists]
        (simple / name / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(rows) + "\n</body></html>\n")
        links.append(f'<a href="{name}/">{name}</a><br/>')
    (simple / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1; yields the base URL (``http://127.0.0.1:PORT``)."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def make_index(root: Path, dists: list[tuple[str, str, tuple[str, ...], str]], sdists: list[tuple[str, str]] = ()) -> Path:
    """Build ``root/files`` (wheels: (name, version, requires, tag); sdist-only: (name, version)) and its simple pages."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    for name, version, requires, tag in dists:
        build_wheel(files, name, version, requires, tag)
    for name, version in sdists:
        build_sdist(files, name, version)
    write_simple_index(files, root)
    return root
