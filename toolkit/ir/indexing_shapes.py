"""Shape rules of the indexing ops: gather, scatter, dynamic-slice, dynamic-update-slice, as
XLA's ShapeInference defines them (``InferGatherShape``, ``InferScatterShape`` ...)."""
from __future__ import annotations

from .shapes import Shape


class IndexingShapeError(ValueError):
    """Raised through shape_inference as a ShapeError."""


def _sorted_unique(dims, what: str, bound: int) -> tuple[int, ...]:
    dims = tuple(dims)
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < bound for d in dims):
        raise IndexingShapeError(
            f"{what}={{{','.join(map(str, dims))}}} must be sorted, unique and below {bound}"
        )
    return dims


def _no_batching(attrs, keys) -> None:
    for key in keys:
        if attrs.get(key):
            raise IndexingShapeError(f"{key} (batched gather/scatter) is not supported by toolkit")


def index_batch_dims(indices: Shape, index_vector_dim: int) -> tuple[tuple[int, ...], int]:
    """The batch dimensions of a start-indices array (all but the index vector dimension) and
    the length of the index vector (1 when index_vector_dim is the rank: an implicit trailing 1)."""
    if not 0 <= index_vector_dim <= indices.rank:
        raise IndexingShapeError(
            f"index_vector_dim={index_vector_dim} is out of range for indices "
            f"{indices.to_text(False)}"
        )
    if not indices.dtype.is_integer:
        raise IndexingShapeError(f"start indices must be integers, got {indices.to_text(False)}")
    batch = tuple(d for i, d in enumerate(indices.dims) if i != index_vector_dim)
    length = indices.dims[index_vector_dim] if index_vector_dim < indices.rank else 1
    return batch, length


def gather_shape(operand: Shape, indices: Shape, attrs) -> Shape:
    _no_batching(attrs, ("operand_batching_dims", "start_indices_batching_dims"))
    ivd = attrs.get("index_vector_dim")
    if not isinstance(ivd, int):
        raise IndexingShapeError("gather needs index_vector_dim=")
    batch, length = index_batch_dims(indices, ivd)
    sizes = tuple(attrs.get("slice_sizes", ()))
    if len(sizes) != operand.rank:
        raise IndexingShapeError(
            f"gather slice_sizes has {len(sizes)} entries for operand {operand.to_text(False)}"
        )
    for i, (s, d) in enumerate(zip(sizes, operand.dims)):
        if not 0 <= s <= d:
            raise IndexingShapeError(
                f"gather slice_sizes[{i}]={s} is out of range for operand dimension {i} ({d})"
            )
    collapsed = _sorted_unique(
        attrs.get("collapsed_slice_dims", ()), "collapsed_slice_dims", operand.rank
    )
    for d in collapsed:
        if sizes[d] > 1:
            raise IndexingShapeError(
                f"gather collapses dimension {d}, whose slice size {sizes[d]} is not 1"
            )
    start_map = tuple(attrs.get("start_index_map", ()))
    if len(start_map) != length or len(set(start_map)) != len(start_map) or \
            any(not 0 <= d < operand.rank for d in start_map):
        raise IndexingShapeError(
            f"gather start_index_map={{{','.join(map(str, start_map))}}} must name {length} "
            f"distinct operand dimensions (the index vector's length)"
        )
    kept = [s for i, s in enumerate(sizes) if i not in collapsed]
    rank = len(batch) + len(kept)
    offset = _sorted_unique(attrs.get("offset_dims", ()), "offset_dims", max(rank, 1))
    if len(offset) != len(kept):
        raise IndexingShapeError(
            f"gather offset_dims has {len(offset)} entries; the slice keeps {len(kept)} dimensions"
        )
    dims, k, b = [], iter(kept), iter(batch)
    for d in range(rank):
        dims.append(next(k) if d in offset else next(b))
    return operand.with_dims(dims)


def scatter_shape(operand: Shape, indices: Shape, updates: Shape, attrs) -> Shape:
    _no_batching(attrs, ("input_batching_dims", "scatter_indices_batching_dims"))
    ivd = attrs.get("index_vector_dim")
    if not isinstance(ivd, int):
        raise IndexingShapeError("scatter needs index_vector_dim=")
    batch, length = index_batch_dims(indices, ivd)
    if updates.dtype != operand.dtype:
        raise IndexingShapeError(
            f"scatter updates {updates.to_text(False)} differ in type from operand "
            f"{operand.to_text(False)}"
        )
    window = _sorted_unique(
        attrs.get("update_window_dims", ()), "update_window_dims", max(updates.rank, 1)
    )
    inserted = _sorted_unique(
        attrs.get("inserted_window_dims", ()), "inserted_window_dims", max(operand.rank, 1)
    )
    if len(window) + len(inserted) != operand.rank:
        raise IndexingShapeError(
            f"scatter: {len(window)} update window dims and {len(inserted)} inserted dims "
            f"do not add up to the operand's rank {operand.rank}"
        )
    to_operand = tuple(attrs.get("scatter_dims_to_operand_dims", ()))
    if len(to_operand) != length or len(set(to_operand)) != len(to_operand) or \
            any(not 0 <= d < operand.rank for d in to_operand):
        raise IndexingShapeError(
            f"scatter_dims_to_operand_dims={{{','.join(map(str, to_operand))}}} must name "
            f"{length} distinct operand dimensions"
        )
    if updates.rank != len(window) + len(batch):
        raise IndexingShapeError(
            f"scatter updates {updates.to_text(False)} need rank {len(window) + len(batch)} "
            f"({len(window)} window + {len(batch)} scatter dimensions)"
        )
    window_operand_dims = [d for d in range(operand.rank) if d not in inserted]
    for w, od in zip(window, window_operand_dims):
        if updates.dims[w] > operand.dims[od]:
            raise IndexingShapeError(
                f"scatter update window dimension {w} ({updates.dims[w]}) is larger than "
                f"operand dimension {od} ({operand.dims[od]})"
            )
    scatter_dims = [d for i, d in enumerate(updates.dims) if i not in window]
    if tuple(scatter_dims) != batch:
        raise IndexingShapeError(
            f"scatter updates' scatter dimensions {tuple(scatter_dims)} do not match the "
            f"indices' batch dimensions {batch}"
        )
    comp = attrs.get("to_apply")
    if comp is None:
        raise IndexingShapeError("scatter needs to_apply=")
    scalar = Shape(operand.dtype, ())
    if len(comp.parameters) != 2 or any(not p.shape.same_type(scalar) for p in comp.parameters) or \
            not comp.root.shape.same_type(scalar):
        raise IndexingShapeError(
            f"scatter combiner %{comp.name} must map two {operand.dtype.name} scalars to one"
        )
    return Shape(operand.dtype, operand.dims)


def _start_indices(operand: Shape, starts, opcode: str) -> None:
    if len(starts) == 1 and starts[0].rank == 1:  # XLA's old form: one vector
        if starts[0].dims[0] != operand.rank or not starts[0].dtype.is_integer:
            raise IndexingShapeError(
                f"{opcode} start index vector {starts[0].to_text(False)} needs {operand.rank} "
                "integers"
            )
        return
    if len(starts) != operand.rank:
        raise IndexingShapeError(
            f"{opcode} needs {operand.rank} scalar start indices, got {len(starts)}"
        )
    for s in starts:
        if s.rank != 0 or not s.dtype.is_integer or s.dtype != starts[0].dtype:
            raise IndexingShapeError(
                f"{opcode} start indices must be integer scalars of one type, got "
                f"{s.to_text(False)}"
            )


def dynamic_slice_shape(operand: Shape, starts, attrs) -> Shape:
    sizes = tuple(attrs.get("dynamic_slice_sizes", ()))
    _start_indices(operand, starts, "dynamic-slice")
    if len(sizes) != operand.rank or any(not 0 <= s <= d for s, d in zip(sizes, operand.dims)):
        raise IndexingShapeError(
            f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}} do not fit operand "
            f"{operand.to_text(False)}"
        )
    return operand.with_dims(sizes)


def dynamic_update_slice_shape(operand: Shape, update: Shape, starts) -> Shape:
    _start_indices(operand, starts, "dynamic-update-slice")
    if update.dtype != operand.dtype or update.rank != operand.rank or \
            any(u > d for u, d in zip(update.dims, operand.dims)):
        raise IndexingShapeError(
            f"dynamic-update-slice update {update.to_text(False)} does not fit in "
            f"{operand.to_text(False)}"
        )
    return Shape(operand.dtype, operand.dims)
