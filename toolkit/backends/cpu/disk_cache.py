"""The persistent compilation cache: machine code on disk, so a new process skips LLVM.

Entries live in ``$TOOLKIT_CACHE_DIR`` (default: ``$XDG_CACHE_HOME/toolkit`` or
``~/.cache/toolkit``); ``TOOLKIT_CACHE_DIR=off`` disables the cache. An entry is keyed by the
optimised HLO (without metadata), the target triple, CPU name and features, the toolkit,
llvmlite and LLVM versions, and a hash of the code generator's own source. Each file starts with a header naming its key and the SHA-256 of
its payload: a corrupted or foreign entry is rebuilt and overwritten, never executed."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import tempfile

MAGIC = b"toolkit-object-cache 1\n"


def cache_dir() -> str | None:
    configured = os.environ.get("TOOLKIT_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in ("", "off", "0", "none") else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolkit")


def _versions() -> dict:
    from importlib import metadata

    import llvmlite

    try:
        toolkit_version = metadata.version("toolkit")
    except metadata.PackageNotFoundError:  # running from a source tree
        toolkit_version = "source"
    return {"toolkit": toolkit_version, "llvmlite": llvmlite.__version__,
            "codegen": _codegen_fingerprint()}


@functools.lru_cache(maxsize=None)
def _codegen_fingerprint() -> str:
    """A hash of the modules that decide what machine code a program becomes: a change to them
    (a fast-math flag, a loop schedule) must never load code an older emitter produced, even
    under the same version number, as in a source checkout."""
    backends = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*backends.glob("llvm/*.py"), *backends.glob("cpu/*.py")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(module_text: str, host: dict) -> str:
    material = json.dumps({"hlo": module_text, "host": host, **_versions()}, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def _path(directory: str, key: str) -> str:
    return os.path.join(directory, "cpu", key[:2], key + ".o")


def load(key: str) -> tuple[bytes | None, str]:
    """(object code, status): status is 'hit', 'absent', 'corrupt' or 'foreign'."""
    directory = cache_dir()
    if directory is None:
        return None, "disabled"
    path = _path(directory, key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None, "absent"
    if not data.startswith(MAGIC):
        return None, "corrupt"
    try:
        header_end = data.index(b"\n", len(MAGIC))
        header = json.loads(data[len(MAGIC):header_end])
    except ValueError:
        return None, "corrupt"
    payload = data[header_end + 1:]
    if header.get("key") != key:
        return None, "foreign"
    if hashlib.sha256(payload).hexdigest() != header.get("sha256") or len(payload) != header.get("size"):
        return None, "corrupt"
    return payload, "hit"


def store(key: str, payload: bytes) -> None:
    directory = cache_dir()
    if directory is None:
        return
    path = _path(directory, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        header = json.dumps({"key": key, "sha256": hashlib.sha256(payload).hexdigest(),
                             "size": len(payload)}).encode()
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + header + b"\n" + payload)
        os.replace(tmp, path)  # atomic: readers never see a half-written entry
    except OSError:
        pass  # a read-only or full disk only costs the next process a compile
