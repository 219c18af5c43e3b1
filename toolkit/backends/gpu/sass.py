"""SASS, the GPU's own machine code: the PTX assembled by ``ptxas`` for one architecture and
disassembled by ``nvdisasm`` (or ``cuobjdump``), headed by what ptxas reports per kernel
(registers, shared memory, spills). Needs the CUDA tools, not a GPU."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile


def _pip_tool(name: str) -> str | None:
    """A CUDA tool installed from PyPI (``pip install nvidia-cuda-nvdisasm``) rather than the
    toolkit."""
    for site in sys.path:
        for path in glob.glob(os.path.join(site, "nvidia", "cu*", "bin", name)):
            if os.access(path, os.X_OK):
                return path
    return None


def find_tools() -> tuple[str | None, str | None]:
    """(ptxas, disassembler): paths, or None for each tool not found."""
    ptxas = shutil.which("ptxas") or _pip_tool("ptxas")
    disassembler = shutil.which("nvdisasm") or _pip_tool("nvdisasm") or shutil.which("cuobjdump") \
        or _pip_tool("cuobjdump")
    return ptxas, disassembler


def missing_tools() -> str | None:
    ptxas, disassembler = find_tools()
    missing = [
        name
        for name, path in (("ptxas", ptxas), ("nvdisasm or cuobjdump", disassembler))
        if path is None
    ]
    if not missing:
        return None
    return (f"stage 'sass' needs {' and '.join(missing)} from the CUDA toolkit on the PATH "
            "(nvdisasm also comes with: pip install nvidia-cuda-nvdisasm)")


def sass(ptx: str, arch: str) -> str:
    reason = missing_tools()
    if reason is not None:
        raise RuntimeError(reason)
    ptxas, disassembler = find_tools()
    with tempfile.TemporaryDirectory(prefix="toolkit-sass-") as tmp:
        source, cubin = os.path.join(tmp, "kernels.ptx"), os.path.join(tmp, "kernels.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        built = subprocess.run(
            [ptxas, f"-arch={arch}", "-v", source, "-o", cubin], capture_output=True, text=True
        )
        if built.returncode != 0:
            raise RuntimeError(
                f"ptxas rejected toolkit's PTX for {arch} (an internal error; please report "
                f"it):\n{built.stderr.strip()}"
            )
        tool = os.path.basename(disassembler)
        args = (
            [disassembler, "-c", cubin]
            if tool.startswith("nvdisasm")
            else [disassembler, "-sass", cubin]
        )
        listed = subprocess.run(args, capture_output=True, text=True)
        if listed.returncode != 0:
            raise RuntimeError(f"{tool} could not disassemble the cubin: {listed.stderr.strip()}")
    usage = [f"// {line.strip()}" for line in built.stderr.splitlines() if line.strip()]
    return "\n".join([f"// SASS for {arch}: ptxas -v, then {tool}", *usage, "", listed.stdout])
