"""The persistent cache under attack: every hostile entry or folder ends in a fresh compile and a
correct result, never a crash, a hang or foreign machine code running. Each case runs in a
subprocess with a timeout, because the failures it guards against are segfaults and hangs."""
import hashlib
import hmac
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest

from toolkit.backends import disk_cache

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Two programs with the same kernel names and calling convention: the machine code of one,
# loaded for the other, would run and give the other's result.
_PROGRAM = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import toolkit as tk

    which = sys.argv[1]
    fns = {"tanh": lambda v: np.tanh(v) * 3 + 1, "sin": lambda v: np.sin(v) * 3 + 1}
    x = np.linspace(-2, 2, 4096).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tk.profile() as prof:
            out = tk.jit(fns[which], backend="cpu")(x)
    expected = fns[which](x)
    print(json.dumps({"cache": prof.compiles[-1].cache,
                      "max_error": float(np.max(np.abs(out - expected))),
                      "warnings": [str(w.message) for w in caught]}))
""")


def run_program(env_dirs, which="tanh", timeout=60, extra_env=None):
    cache, key_file = env_dirs
    env = {**os.environ, "TOOLKIT_CACHE_DIR": str(cache), "TOOLKIT_CACHE_KEY_FILE": str(key_file),
           "PYTHONPATH": str(ROOT), **(extra_env or {})}
    proc = subprocess.run([sys.executable, "-c", _PROGRAM, which], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["max_error"] < 1e-5, result
    return result


@pytest.fixture
def dirs(tmp_path):
    cache = tmp_path / "cache"
    key_file = tmp_path / "keys" / "cache-key"
    return cache, key_file


@pytest.fixture(scope="module")
def _good_cache(tmp_path_factory):
    """A cache folder and key holding tanh's good entry, made once by a real run."""
    base = tmp_path_factory.mktemp("good")
    made = (base / "cache", base / "keys" / "cache-key")
    assert run_program(made)["cache"] == "miss"
    return made


@pytest.fixture
def seeded(_good_cache, tmp_path):
    """``dirs`` as a first run of tanh leaves them (a copy of ``_good_cache``, with its
    permissions): each test tampers with its own copy."""
    cache, key_file = tmp_path / "cache", tmp_path / "keys" / "cache-key"
    shutil.copytree(_good_cache[0], cache)
    shutil.copytree(_good_cache[1].parent, key_file.parent)
    return cache, key_file


def _entry(cache) -> pathlib.Path:
    (entry,) = list(pathlib.Path(cache).rglob("*.o"))
    return entry


def _split(data: bytes):
    header_end = data.index(b"\n", len(disk_cache.MAGIC))
    return json.loads(data[len(disk_cache.MAGIC):header_end]), data[header_end + 1:]


def _sign(secret: bytes, key: str, payload: bytes) -> bytes:
    mac = hmac.new(secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest()
    header = json.dumps({"key": key, "size": len(payload), "hmac": mac}).encode()
    return disk_cache.MAGIC + header + b"\n" + payload


def test_a_good_entry_is_a_hit_and_the_folder_and_key_are_private(dirs):
    cache, key_file = dirs
    assert run_program(dirs)["cache"] == "miss"
    assert run_program(dirs)["cache"] == "persistent_hit"
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert os.path.getsize(key_file) == disk_cache.KEY_BYTES
    assert not disk_cache._inside(str(key_file), str(cache))


def test_foreign_machine_code_signed_with_another_key_never_runs(dirs, tmp_path):
    """An attacker who can write the cache folder but not read the key puts the machine code of
    sin(x)*3+1 where tanh(x)*3+1's entry lives, signed with a key of their own."""
    cache, key_file = dirs
    run_program(dirs, "sin")
    sin_header, sin_code = _split(_entry(cache).read_bytes())
    _entry(cache).unlink()
    run_program(dirs, "tanh")
    tanh_entry = _entry(cache)
    tanh_key = _split(tanh_entry.read_bytes())[0]["key"]
    tanh_entry.write_bytes(_sign(b"the attacker's own key".ljust(32), tanh_key, sin_code))
    result = run_program(dirs, "tanh")  # max_error checks tanh's result, not sin's
    assert result["cache"] == "miss (unauthenticated cache entry rebuilt)"
    # the control: signed with the real key, the same bytes are loaded (and would run)
    tanh_entry.write_bytes(_sign(key_file.read_bytes(), tanh_key, sin_code))
    proc_env = {"TOOLKIT_CACHE_DIR": str(cache), "TOOLKIT_CACHE_KEY_FILE": str(key_file)}
    with pytest.raises(AssertionError, match="max_error"):
        run_program(dirs, "tanh", extra_env=proc_env)


def test_an_entry_from_the_old_unkeyed_format_is_not_loaded(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    header, payload = _split(entry.read_bytes())
    old = {
        "key": header["key"],
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
    }
    entry.write_bytes(b"toolkit-object-cache 1\n" + json.dumps(old).encode() + b"\n" + payload)
    assert run_program(seeded)["cache"] == "miss (corrupt cache entry rebuilt)"


@pytest.mark.parametrize("header", [
    b"[1, 2, 3]", b"null", b'"a string"', b"[" * 100000 + b"]" * 100000,
    b'{"key": 5, "size": "x", "hmac": null}', b"\xff\xfe not utf-8", b"{" * 10000,
])
def test_malformed_headers_are_corrupt_entries(seeded, header):
    cache, _ = seeded
    entry = _entry(cache)
    _, payload = _split(entry.read_bytes())
    entry.write_bytes(disk_cache.MAGIC + header + b"\n" + payload)
    assert run_program(seeded)["cache"] == "miss (corrupt cache entry rebuilt)"


def test_garbage_payload_with_a_plausible_header_compiles_afresh(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    header, _ = _split(entry.read_bytes())
    garbage = bytes(range(256)) * 64
    header["size"], header["hmac"] = len(garbage), hashlib.sha256(garbage).hexdigest()
    entry.write_bytes(disk_cache.MAGIC + json.dumps(header).encode() + b"\n" + garbage)
    assert run_program(seeded)["cache"] == "miss (unauthenticated cache entry rebuilt)"


def test_a_fifo_at_the_entry_path_does_not_hang(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    entry.unlink()
    os.mkfifo(entry)
    assert run_program(seeded, timeout=60)["cache"] == "miss (unsafe cache entry rebuilt)"


def test_a_symlink_to_dev_zero_is_not_read(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    entry.unlink()
    entry.symlink_to("/dev/zero")
    assert run_program(seeded, timeout=60)["cache"] == "miss (unsafe cache entry rebuilt)"


def test_an_oversized_entry_is_not_read(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    with open(entry, "r+b") as f:
        f.truncate(disk_cache.MAX_ENTRY_BYTES + 1)  # sparse: no real disk used
    assert run_program(seeded)["cache"] == "miss (unsafe cache entry rebuilt)"


def test_a_group_writable_cache_folder_is_not_used(dirs):
    cache, _ = dirs
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    result = run_program(dirs)
    assert result["cache"] == "miss"
    assert any("writable by group or others" in w and "without the persistent cache" in w
               for w in result["warnings"]), result
    assert not list(cache.rglob("*.o"))


def test_a_key_file_others_can_read_disables_the_cache(seeded):
    cache, key_file = seeded
    os.chmod(key_file, 0o644)
    result = run_program(seeded)
    assert result["cache"] == "miss" and any("chmod 600" in w for w in result["warnings"])


def test_a_key_file_inside_the_cache_folder_is_refused(dirs):
    cache, _ = dirs
    result = run_program((cache, cache / "cache-key"))
    assert result["cache"] == "miss"
    assert any("inside the cache folder" in w for w in result["warnings"])
    assert not list(cache.rglob("*.o")) and not (cache / "cache-key").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_entries_and_folders_owned_by_another_user_are_not_trusted(seeded):
    cache, _ = seeded
    entry = _entry(cache)
    os.chown(entry, 12345, 12345)
    assert run_program(seeded)["cache"] == "miss (unsafe cache entry rebuilt)"
    os.chown(cache, 12345, 12345)
    result = run_program(seeded)
    assert result["cache"] == "miss" and any("owned by uid 12345" in w for w in result["warnings"])


def test_concurrent_writers_leave_a_loadable_entry(dirs):
    cache, key_file = dirs
    env = {**os.environ, "TOOLKIT_CACHE_DIR": str(cache), "TOOLKIT_CACHE_KEY_FILE": str(key_file),
           "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _PROGRAM, "tanh"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["max_error"] < 1e-5
    assert len(key_file.read_bytes()) == disk_cache.KEY_BYTES  # one key won the race
    assert run_program(dirs)["cache"] == "persistent_hit"
    assert not [p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".o")]


def test_the_size_cap_evicts_least_recently_used_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOOLKIT_CACHE_KEY_FILE", str(tmp_path / "key"))
    directory = disk_cache.cache_dir()
    keys = [f"{i:02x}" + "0" * 62 for i in range(6)]
    for i, key in enumerate(keys):
        disk_cache.store(key, bytes(1000))
        os.utime(disk_cache._path(directory, key), (1000 + i, 1000 + i))
    assert disk_cache.load(keys[0]) == (bytes(1000), "hit")  # now the most recently used
    monkeypatch.setenv("TOOLKIT_CACHE_MAX_BYTES", "3.6kB")
    disk_cache.store("ff" + "0" * 62, bytes(1000))
    left = {k for k in keys if os.path.exists(disk_cache._path(directory, k))}
    assert left == {keys[0], keys[5]}
    assert sum(size for _, size, _ in disk_cache.entries(directory)) <= 3600


def test_loading_never_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOOLKIT_CACHE_KEY_FILE", str(tmp_path / "key"))
    monkeypatch.setattr(disk_cache, "_read_entry", lambda path: 1 / 0)
    assert disk_cache.load("ab" * 32) == (None, "corrupt")


def test_the_codegen_fingerprint_covers_what_decides_machine_code():
    names = {str(p.relative_to(ROOT / "toolkit")) for p in disk_cache.codegen_sources()}
    for needed in ("ir/queries.py", "ir/dtypes.py", "ir/ops.py", "backends/buffer_plan.py",
                   "backends/llvm/elemental.py", "backends/cpu/kernels.py", "config.py"):
        assert needed in names
