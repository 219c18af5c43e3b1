"""The persistent compilation cache: generated code on disk, so a new process skips LLVM (the
CPU's object code, ``cpu/``; the GPU's PTX with its kernels' launch facts, ``gpu/``).

Entries live in ``$TOOLKIT_CACHE_DIR`` (default: ``$XDG_CACHE_HOME/toolkit`` or
``~/.cache/toolkit``); ``TOOLKIT_CACHE_DIR=off`` disables the cache. An entry is keyed by the
optimised HLO (without metadata), the target triple, CPU name and features, the toolkit,
llvmlite and LLVM versions, and a hash of the source of every module that decides generated code.

The trust model (machine code from this folder runs inside the process, so it is treated like
ssh treats ``~/.ssh``):

- The folder is used only if it is a directory owned by the current user and not writable by
  group or others; it is created with mode 0700. Otherwise toolkit warns once and compiles
  without it.
- Every entry carries an HMAC-SHA256 of its key and payload, made with a per-user secret key
  (``$TOOLKIT_CACHE_KEY_FILE``, default ``$XDG_CONFIG_HOME/toolkit/cache-key`` or
  ``~/.config/toolkit/cache-key``; 32 random bytes, mode 0600, never inside the cache folder).
  An entry written by anyone without that key (another user, a cache restored from CI, an
  attacker with write access to the folder but not to the key) is never loaded.
- An entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` and read only if it is a regular file
  owned by the user and no larger than ``MAX_ENTRY_BYTES``; its header is parsed defensively.
- Whatever is wrong with an entry, the call compiles afresh (and overwrites it); loading never
  raises, hangs or runs code that toolkit did not write.
- The folder is kept under ``$TOOLKIT_CACHE_MAX_BYTES`` (default 2 GiB) by deleting the least
  recently used entries after each store."""
from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import json
import os
import pathlib
import secrets
import stat
import tempfile
import threading
import warnings

from ..config import env_bytes, env_str

MAGIC = b"toolkit-object-cache 2\n"
MAX_ENTRY_BYTES = 256 << 20
MAX_HEADER_BYTES = 4096
DEFAULT_MAX_BYTES = 2 << 30
KEY_BYTES = 32


class CacheWarning(UserWarning):
    """The persistent cache cannot be used safely; toolkit compiles without it."""


_warned: set[str] = set()
_lock = threading.Lock()


def _warn_once(message: str) -> None:
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(message + "; compiling without the persistent cache", CacheWarning, stacklevel=4)


def configured_dir() -> str | None:
    """Where the cache is configured to live (None: turned off), before any safety check."""
    configured = env_str("TOOLKIT_CACHE_DIR")
    if configured is not None:
        return None if configured.lower() in ("", "off", "0", "none") else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolkit")


def key_file_path() -> str:
    configured = env_str("TOOLKIT_CACHE_KEY_FILE")
    if configured:
        return configured
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "toolkit", "cache-key")


def _private_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a directory only the current user can write, or None."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot read {path!r} ({e.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path!r} is not a directory"
    if st.st_uid != os.getuid():
        return f"{path!r} is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return (f"{path!r} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
                f"run chmod go-w {path!r}")
    return None


def _make_private_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        pass  # the check that follows says what is wrong


def cache_dir() -> str | None:
    """The cache folder if it is enabled and safe to use, else None (warning once why)."""
    directory = configured_dir()
    if directory is None:
        return None
    _make_private_dir(directory)
    problem = _private_dir_problem(directory)
    if problem is not None:
        _warn_once(f"toolkit's cache folder is unsafe: {problem}")
        return None
    return directory


# ---- the per-user secret key ---------------------------------------------------------------
def _read_key(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise PermissionError(f"{path!r} is not a regular file owned by you")
        if st.st_mode & 0o077:
            raise PermissionError(f"{path!r} is readable or writable by others "
                                  f"(mode {stat.S_IMODE(st.st_mode):o}); run chmod 600 {path!r}")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise PermissionError(f"{path!r} does not hold a {KEY_BYTES}-byte key")
    return data


def _create_key(path: str) -> None:
    """Write a new key atomically: a reader never sees a half-written one, and of two processes
    creating it at once, one wins and both use its key."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".cache-key-")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def _inside(path: str, directory: str) -> bool:
    real_path, real_dir = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real_path, real_dir]) == real_dir


def secret_key(directory: str) -> bytes | None:
    """The user's cache key (created on first use), or None with a warning if it is unsafe."""
    path = key_file_path()
    if _inside(path, directory):
        _warn_once(f"the cache key file {path!r} lies inside the cache folder {directory!r}, "
                   "where whoever can write entries could read it")
        return None
    try:
        try:
            return _read_key(path)
        except FileNotFoundError:
            _create_key(path)
            return _read_key(path)
    except OSError as e:
        _warn_once(f"toolkit's cache key is unusable: {e.strerror or e}")
        return None


def _mac(secret: bytes, key: str, payload: bytes) -> str:
    return hmac.new(secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest()


# ---- keys ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[str, str]:
    from importlib import metadata

    import llvmlite

    try:
        toolkit_version = metadata.version("toolkit")
    except metadata.PackageNotFoundError:  # running from a source tree
        toolkit_version = "source"
    return toolkit_version, llvmlite.__version__


def _versions(kind: str = "cpu") -> dict:
    toolkit_version, llvmlite_version = _package_versions()
    return {
        "toolkit": toolkit_version,
        "llvmlite": llvmlite_version,
        "codegen": _codegen_fingerprint(kind),
    }


KINDS = ("cpu", "gpu")  # the backends whose code is kept, each in a folder of its own


def codegen_sources(kind: str = "cpu") -> list[pathlib.Path]:
    """Every module that decides what code an optimised module becomes: the IR (op facts,
    dtypes, shapes, queries), the buffer plan, the shared LLVM emitters, the backend's own
    modules and the configuration they read."""
    package = pathlib.Path(__file__).resolve().parents[1]
    backends = package / "backends"
    return sorted([*package.glob("ir/*.py"), *backends.glob("*.py"), *backends.glob("llvm/*.py"),
                   *backends.glob(f"{kind}/*.py"), package / "config.py"])


@functools.lru_cache(maxsize=None)
def _codegen_fingerprint(kind: str = "cpu") -> str:
    """A change to the code generator (a fast-math flag, a loop schedule) must never load code an
    older emitter produced, even under the same version number, as in a source checkout."""
    package = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in codegen_sources(kind):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(module_text: str, host: dict, kind: str = "cpu") -> str:
    material = json.dumps({"hlo": module_text, "host": host, **_versions(kind), "kind": kind},
                          sort_keys=True)
    return kind + "-" + hashlib.sha256(material.encode()).hexdigest()


def _path(directory: str, key: str) -> str:
    """A key names its kind (``gpu-…``; a CPU key may be bare hex, as before)."""
    kind, _, digest = key.rpartition("-")
    kind = kind if kind in KINDS else "cpu"
    return os.path.join(directory, kind, digest[:2], digest + (".o" if kind == "cpu" else ".bin"))


# ---- reading -------------------------------------------------------------------------------
def _read_entry(path: str) -> bytes:
    """The bytes of a regular file the user owns, without following links or blocking on FIFOs
    and devices, and never more than MAX_ENTRY_BYTES. OSError for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_uid != os.getuid():
            raise OSError(errno.EPERM, "owned by another user")
        if st.st_size > MAX_ENTRY_BYTES:
            raise OSError(errno.EFBIG, "too large")
        chunks, remaining = [], st.st_size
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _parse_header(data: bytes) -> tuple[dict, bytes] | None:
    if not data.startswith(MAGIC):
        return None
    header_end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER_BYTES)
    if header_end < 0:
        return None
    try:
        header = json.loads(data[len(MAGIC):header_end].decode("ascii"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(header, dict) or not isinstance(header.get("key"), str) \
            or type(header.get("size")) is not int or not isinstance(header.get("hmac"), str):
        return None
    return header, data[header_end + 1:]


def load(key: str) -> tuple[bytes | None, str]:
    """(object code, status). Status: 'hit', 'disabled', 'absent', 'unsafe' (not a regular file
    of the user's), 'corrupt', 'foreign' (another key's entry) or 'unauthenticated' (not made
    with this user's key). Never raises."""
    try:
        directory = cache_dir()
        if directory is None:
            return None, "disabled"
        secret = secret_key(directory)
        if secret is None:
            return None, "disabled"
        path = _path(directory, key)
        try:
            data = _read_entry(path)
        except FileNotFoundError:
            return None, "absent"
        except OSError:
            return None, "unsafe"
        parsed = _parse_header(data)
        if parsed is None:
            return None, "corrupt"
        header, payload = parsed
        if header["key"] != key:
            return None, "foreign"
        if len(payload) != header["size"] or not hmac.compare_digest(
                _mac(secret, key, payload), header["hmac"]):
            return None, "unauthenticated"
        try:
            os.utime(path)  # recency for the size cap's least-recently-used eviction
        except OSError:
            pass
        return payload, "hit"
    except Exception:  # noqa: BLE001 - whatever is wrong, the caller compiles afresh
        return None, "corrupt"


# ---- writing -------------------------------------------------------------------------------
def max_bytes() -> int:
    return env_bytes("TOOLKIT_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES, minimum=0)


def store(key: str, payload: bytes) -> None:
    """Write an entry (atomically) and evict old ones past the size cap. Never raises."""
    try:
        directory = cache_dir()
        if directory is None or len(payload) > MAX_ENTRY_BYTES:
            return
        secret = secret_key(directory)
        if secret is None:
            return
        path = _path(directory, key)
        for folder in (os.path.dirname(os.path.dirname(path)), os.path.dirname(path)):
            if not os.path.isdir(folder):
                os.makedirs(folder, mode=0o700, exist_ok=True)
        header = json.dumps({"key": key, "size": len(payload),
                             "hmac": _mac(secret, key, payload)}).encode()
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + header + b"\n" + payload)
            os.replace(tmp, path)  # atomic: readers never see a half-written entry
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        evict(directory, max_bytes())
    except Exception:  # noqa: BLE001 - a read-only or full disk only costs a later compile
        pass


def entries(directory: str) -> list[tuple[float, int, str]]:
    """(last use, size, path) of every entry file in the cache folder (every kind's)."""
    found = []
    for kind in KINDS:
        found.extend(_entries_of(os.path.join(directory, kind)))
    return found


def _entries_of(root: str) -> list[tuple[float, int, str]]:
    found = []
    try:
        shards = os.scandir(root)
    except OSError:
        return found
    with shards:
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            try:
                files = os.scandir(shard.path)
            except OSError:
                continue
            with files:
                for entry in files:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        found.append((st.st_mtime, st.st_size, entry.path))
    return found


def evict(directory: str, limit: int) -> int:
    """Delete least-recently-used entries until the folder holds at most ``limit`` bytes;
    the number deleted."""
    found = entries(directory)
    total = sum(size for _, size, _ in found)
    deleted = 0
    for _, size, path in sorted(found):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        total -= size
        deleted += 1
    return deleted
