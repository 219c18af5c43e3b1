"""``tk.jit(f, in_shardings=..., out_shardings=...)``: a function written for whole arrays,
run over the devices of a mesh, as ``jax.jit`` with ``NamedSharding`` objects does.

``f`` is traced once on the whole arrays' shapes. XLA-style SPMD partitioning
(``passes/spmd_partitioner.py``) then turns the program into the one every device runs on its
blocks, inserting the collectives the shardings make necessary (a Megatron row-parallel
matmul's all-reduce, a data-parallel loss's all-reduce ...); ``.lower(*args).as_text()``
shows them and ``.decisions`` says why each is there. The program is compiled once per
signature and run on the mesh's host devices (one thread each, the collectives meeting in
shared memory), or on this process's device under ``tk.distributed.initialize()``. The
results are whole NumPy arrays, assembled from the blocks by their shardings."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from . import distributed
from .frontend.collectives import Mesh, P
from .frontend.pytree import flatten, unflatten
from .ir.ops import GroupOp
from .profiler.recorder import RECORDER
from .passes.shardings import (MeshShape, Partitioned, PartitionError, Spec, check_spec,
                               communicates, spec_text)
from .passes.spmd_partitioner import partition



class NamedSharding:
    """``tk.NamedSharding(mesh, spec)``: an array split over ``mesh`` as the partition spec
    ``spec`` (a ``tk.P``) says: dimension ``i`` over the axes ``spec[i]`` names."""

    def __init__(self, mesh: Mesh, spec: P | None = None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a tk.Mesh, got {type(mesh).__name__}")
        self.mesh = mesh
        self.spec = spec if isinstance(spec, P) else P(*(spec or ()))

    def spec_for(self, ndim: int, what: str) -> Spec:
        if len(self.spec) > ndim:
            raise PartitionError(f"{what}: the sharding {self.spec!r} names {len(self.spec)} "
                                 f"dimensions of a {ndim}-d array")
        return tuple(self.spec.axes(d) for d in range(ndim))

    def __repr__(self) -> str:
        return f"NamedSharding({self.mesh!r}, {self.spec!r})"


class ShardedLowered:
    """A function's partitioned program for one signature: the per-device HLO with its
    collectives (``as_text``), why each is there (``decisions``), and the whole-array program it
    came from (``global_hlo``)."""

    def __init__(self, fn_name: str, program, partitioned: Partitioned, mesh: Mesh):
        self.fn_name = fn_name
        self.program = program
        self.partitioned = partitioned
        self.mesh = mesh
        from .backends.buffer_plan import donated_arguments

        # parameters the per-device program may write in place (XLA's must-alias)
        self.donated = frozenset(donated_arguments(partitioned.module).values())
        root = program.module.entry.root.shape  # the whole results' shapes, flat
        self.shapes = root.elements if not hasattr(root, "dims") else (root,)

    @property
    def hlo(self):
        return self.partitioned.module

    @property
    def global_hlo(self):
        return self.program.module

    @property
    def decisions(self):
        return self.partitioned.decisions

    @property
    def out_specs(self) -> tuple:
        return self.partitioned.out_specs

    def as_text(self, metadata: bool = True) -> str:
        return self.partitioned.module.to_text(metadata=metadata)

    def collectives(self) -> list[str]:
        """The collectives of the per-device program, one line each (op, shape, groups)."""
        return [f"{i.opcode} {i.shape.to_text(False)} over {_groups_text(i)}"
                for i in self.partitioned.module.entry.instructions if communicates(i)]

    def report(self) -> str:
        """The partitioning in words: every collective inserted, where and why."""
        lines = [f"jit({self.fn_name}) partitioned over {self.mesh!r}: "
                 f"{len(self.collectives())} collective(s)"]
        for d in self.decisions:
            at = f" ({d.location})" if d.location else ""
            lines.append(f"  %{d.instruction}{at}: {d.message}")
        outs = ", ".join(spec_text(s) if not hasattr(s, "elements") else "(tuple)"
                         for s in self.out_specs)
        lines.append(f"  results split as: {outs}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ShardedLowered jit({self.fn_name}) over {self.mesh!r}>"


def _groups_text(inst) -> str:
    groups = inst.attr("replica_groups") or ()
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


class ShardedFunction:
    """What ``tk.jit(f, in_shardings=..., out_shardings=...)`` returns."""

    def __init__(self, fn: Callable, in_shardings, out_shardings, *, backend: str | None,
                 pipeline: str, timeout: float | None = None, cache_size: int = 64):
        self.fn = fn
        self.fn_name = getattr(fn, "__name__", "f")
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.backend = backend
        self.pipeline = pipeline
        self.timeout = timeout
        self.cache_size = cache_size  # signatures kept (least recently compiled evicted)
        self.mesh = _the_mesh(in_shardings, out_shardings)
        self._programs: OrderedDict[tuple, tuple] = OrderedDict()
        self.__wrapped__ = fn
        self.__name__ = self.fn_name

    def lower(self, *args, **kwargs) -> ShardedLowered:
        return self._program(args, kwargs, flatten(tuple(args))[0])[0]

    def __call__(self, *args, **kwargs):
        leaves = flatten(tuple(args))[0]
        lowered, compiled, has_collectives, in_specs = self._program(args, kwargs, leaves)
        from .spmd import _block_index, _run_devices

        program = lowered.program
        if program.int_limits:
            program.check_int_limits(leaves)
        program.check_mutable(leaves)
        arrays = [np.asarray(leaf, spec.dtype) for leaf, spec in zip(leaves, program.in_specs)]
        mesh = self.mesh
        if distributed.is_initialized():  # the ranks must run one program
            from .spmd import _distributed_timeout, _timeout

            signature = ", ".join(f"argument {k}: {a.dtype}{list(a.shape)}"
                                  for k, a in enumerate(arrays))
            distributed.agree_on_program(
                self.fn_name, signature,
                lowered.partitioned.module.to_text(metadata=False, digest_literals=True),
                _timeout(_distributed_timeout(self.timeout)))
        # a device's own copy of a split argument's block, and of any argument its program
        # may write in place (a donated one: every device would write the caller's array)
        written = lowered.donated
        blocks = [[np.array(a[_block_index(P(*spec), mesh, d, a.shape)])
                   if any(spec) or k in written else a
                   for k, (a, spec) in enumerate(zip(arrays, in_specs))]
                  for d in range(mesh.size)]
        run = compiled.execute_profiled if RECORDER.active else compiled.execute_leaves
        outs = _run_devices(lambda *b: run(list(b)), has_collectives, blocks, mesh,
                            self.timeout, self.fn_name)
        results = [_whole([o[k] for o in outs], spec, mesh, shape)
                   for k, (spec, shape) in enumerate(zip(lowered.out_specs, lowered.shapes))]
        results = program.split_results(leaves, results)
        if program.out_tree.kind == "leaf":
            return results[0]
        return unflatten(program.out_tree, results)

    def _program(self, args, kwargs, leaves):
        if kwargs:
            raise TypeError(f"jit({self.fn_name}) with in_shardings takes positional arguments "
                            f"only; got keyword(s) {sorted(kwargs)}")
        key = tuple((np.shape(x), np.result_type(x).str, type(x).__name__) for x in leaves)
        found = self._programs.get(key)
        if found is not None:
            self._programs.move_to_end(key)
            return found
        found = self._compile(args)
        self._programs[key] = found
        if len(self._programs) > self.cache_size:
            self._programs.popitem(last=False)
        return found

    def _compile(self, args):
        from .backends import get_backend
        from .stages import lower_positional

        program = lower_positional(self.fn, self.fn_name, tuple(args),
                                   get_backend(self.backend))._program
        in_specs = _leaf_specs(self.in_shardings, args, program, self.fn_name)
        out_specs = _output_specs(self.out_shardings, program, in_specs, self.fn_name)
        mesh_shape = MeshShape(self.mesh.axis_names, tuple(self.mesh.devices.shape))
        partitioned = partition(program.module, mesh_shape, in_specs, out_specs)
        lowered = ShardedLowered(self.fn_name, program, partitioned, self.mesh)
        compiled = _per_device_compiled(program, partitioned, self.mesh, self.backend,
                                        self.pipeline, self.fn_name)
        # (partition-id too: a device's slice of a replicated value depends on who it is)
        has_collectives = any(i.opcode in GroupOp.COLLECTIVE
                              for i in partitioned.module.entry.instructions)
        return lowered, compiled, has_collectives, in_specs


def _per_device_compiled(program, partitioned: Partitioned, mesh: Mesh, backend: str | None,
                         pipeline: str, name: str):
    """The per-device program compiled as any jit program is (its passes, fusion decisions
    and kernels are events under a profile): its arguments are blocks, and it returns every
    result flat, the caller's checks and write-backs done once on the whole arrays."""
    import dataclasses

    from .backends import get_backend
    from .frontend.pytree import TreeDef
    from .frontend.trace_function import TracedProgram
    from .stages import Lowered

    params = partitioned.module.entry.parameters
    specs = tuple(dataclasses.replace(spec, shape=tuple(p.shape.dims))
                  for spec, p in zip(program.in_specs, params))
    root = partitioned.module.entry.root.shape
    count = len(root.elements) if not hasattr(root, "dims") else 1
    flat = TreeDef("tuple", (TreeDef("leaf"),) * count)
    local = TracedProgram(partitioned.module, specs, flat,
                          tuple(f"result {k}" for k in range(count)))
    return Lowered(local, get_backend(backend), f"{name} on {mesh!r}", pipeline).compile()


def _the_mesh(in_shardings, out_shardings) -> Mesh:
    meshes = {id(s.mesh): s.mesh for s in flatten((in_shardings, out_shardings))[0]
              if isinstance(s, NamedSharding)}
    if not meshes:
        raise ValueError("tk.jit: in_shardings/out_shardings name no tk.NamedSharding (a mesh "
                         "and a tk.P per argument)")
    if len(meshes) > 1:
        raise ValueError("tk.jit: the shardings name more than one mesh; one program runs on "
                         "one mesh")
    return next(iter(meshes.values()))


def _per_leaf(shardings, tree, what: str) -> list:
    """One sharding (or None) per leaf of ``tree``: a NamedSharding or None applies to all of
    it; a container of shardings matches the tree's structure."""
    if shardings is None or isinstance(shardings, NamedSharding):
        return [shardings] * len(flatten(tree)[0])
    shard_leaves, shard_tree, _ = flatten(shardings)
    leaves, tree_def, _ = flatten(tree)
    if str(shard_tree) != str(tree_def):
        raise ValueError(f"tk.jit: {what}: the shardings' structure {shard_tree} does not match "
                         f"the value's {tree_def}")
    return shard_leaves


def _leaf_specs(in_shardings, args, program, name: str) -> list[Spec]:
    if isinstance(in_shardings, (NamedSharding, type(None))):
        per_arg = [in_shardings] * len(args)
    else:
        per_arg = list(in_shardings)
        if len(per_arg) != len(args):
            raise ValueError(f"tk.jit({name}): in_shardings has {len(per_arg)} entries for "
                             f"{len(args)} positional arguments")
    shardings: list = []
    for k, (sharding, arg) in enumerate(zip(per_arg, args)):
        shardings += _per_leaf(sharding, arg, f"argument {k} of {name}")
    if len(shardings) != len(program.in_specs):
        raise ValueError(f"tk.jit({name}): {len(shardings)} shardings for "
                         f"{len(program.in_specs)} array arguments")
    specs = []
    for sharding, arg_spec in zip(shardings, program.in_specs):
        ndim = len(arg_spec.shape)
        what = f"argument {arg_spec.path or '?'} of {name}"
        if sharding is None:
            specs.append(((),) * ndim)
            continue
        spec = sharding.spec_for(ndim, what)
        check_spec(spec, program.module.entry.parameters[len(specs)].shape,
                   _mesh_shape(sharding), what)
        specs.append(spec)
    return specs


def _mesh_shape(sharding: NamedSharding) -> MeshShape:
    return MeshShape(sharding.mesh.axis_names, tuple(sharding.mesh.devices.shape))


def _output_specs(out_shardings, program, in_specs: list[Spec], name: str):
    """A spec (or None: as propagated) per result of the traced program: the user's outputs
    by ``out_shardings``; arguments written in place keep their sharding; runtime checks'
    flags are replicated scalars."""
    user_count = len(program.out_paths)
    if out_shardings is None:
        user = [None] * user_count
    elif isinstance(out_shardings, NamedSharding):
        user = [out_shardings] * user_count
    else:
        user = flatten(out_shardings)[0]
        if len(user) != user_count:
            raise ValueError(f"tk.jit({name}): out_shardings has {len(user)} entries for "
                             f"{user_count} outputs")
    root = program.module.entry.root.shape
    shapes = root.elements if not hasattr(root, "dims") else (root,)
    specs = [None if s is None else s.spec_for(len(shapes[k].dims), f"output {k} of {name}")
             for k, s in enumerate(user)]
    specs += [in_specs[k] for k in program.mutated]
    specs += [()] * len(program.checks)
    return specs


def _whole(blocks, spec, mesh: Mesh, shape) -> np.ndarray:
    """The whole array from the devices' blocks (each block once: replicated copies agree)."""
    from .spmd import _block_index

    first = np.asarray(blocks[0])
    if not any(spec):
        return first
    out = np.empty(shape.dims, first.dtype)
    done: set[tuple] = set()
    for device in range(mesh.size):
        index = _block_index(P(*spec), mesh, device, shape.dims)
        key = tuple((s.start, s.stop) for s in index)
        if key not in done:
            out[index] = blocks[device]
            done.add(key)
    return out


def sharded_jit(fn: Callable, in_shardings: Any, out_shardings: Any, **options
                ) -> ShardedFunction:
    return ShardedFunction(fn, in_shardings, out_shardings, **options)


__all__ = ["NamedSharding", "ShardedFunction", "ShardedLowered", "sharded_jit"]
