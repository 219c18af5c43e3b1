"""The GPU's persistent compilation cache: a program's PTX, and what launching its kernels needs
(their entries, work counts and launch modes), kept on disk under the CPU cache's trust model
(``backends/disk_cache.py``: a private folder, entries authenticated with the user's key), so a
new process skips the emitters, LLVM's NVPTX back end and its optimiser, the slow part of a
first call on the GPU.

An entry is keyed by the optimised HLO (without metadata), the updates the buffer plan put in
place, the target architecture, the libdevice file linked in, and the versions and sources of
everything that decides the PTX. A hit plans each kernel again (cheap: no code is emitted) and
takes its code from the entry; an entry that does not match the program it is loaded for (a
kernel missing, another count of kernels) is ignored and rebuilt."""
from __future__ import annotations

import json
import os

from .. import disk_cache
from ..llvm.elemental import CodegenUnsupported
from . import reductions, thread_split
from .codegen import GpuKernel, PtxProgram, planned_kernel
from .libdevice import find_libdevice


def program_key(module, arch: str, in_place: dict) -> str | None:
    """The entry's key, or None when the cache is off."""
    if disk_cache.cache_dir() is None:
        return None
    library = find_libdevice()
    linked = None
    if library is not None:
        try:
            st = os.stat(library)
            linked = [library, st.st_size, st.st_mtime_ns]
        except OSError:
            linked = [library]
    host = {"arch": arch, "libdevice": linked,
            "in_place": sorted((name, -1 if k is None else k) for name, k in in_place.items()),
            # the sizes that choose how a reduction is split (tests and tuning change them)
            "reductions": [reductions.TARGET_BLOCKS, reductions.MIN_PIECE, reductions.MAX_PIECES,
                           thread_split.TARGET_THREADS, thread_split.MAX_THREAD_PIECES]}
    return disk_cache.cache_key(module.to_text(metadata=False, digest_literals=True), host, "gpu")


def store(key: str, program: PtxProgram) -> None:
    payload = {
        "ptx": program.ptx, "arch": program.arch, "unsupported": program.unsupported,
        "llvm_ir": program.llvm_ir, "source_ir": program.source_ir,
        "kernels": [[k.name, k.symbol, k.work_items, k.mode] for k in program.kernels],
    }
    disk_cache.store(key, json.dumps(payload).encode())


def load(key: str, module, in_place: dict) -> tuple[PtxProgram | None, str]:
    """(the program, status): 'hit', or why not ('absent', 'corrupt', 'unauthenticated', ...)."""
    data, status = disk_cache.load(key)
    if data is None:
        return None, status
    try:
        payload = json.loads(data)
        by_name = {i.name: i for i in module.entry.instructions}
        kernels = []
        for name, symbol, work, mode in payload["kernels"]:
            spec = planned_kernel(by_name[name], in_place)
            kernels.append(GpuKernel(name, symbol, spec, int(work), str(mode)))
        return PtxProgram(str(payload["ptx"]), str(payload["arch"]), kernels,
                          [str(u) for u in payload["unsupported"]],
                          str(payload.get("llvm_ir", "")), str(payload.get("source_ir", ""))), "hit"
    except (KeyError, TypeError, ValueError, CodegenUnsupported):
        return None, "corrupt"


__all__ = ["load", "program_key", "store"]
