"""SPMD programs on the reference interpreter: one thread per device, in one process, with
collectives meeting through shared memory (ir/collectives.py), as XLA's host platform runs
``--xla_force_host_platform_device_count`` devices. The oracle for the compiled SPMD runtimes:
every device's results, in device order.

A device that raises makes the others stop at their next collective with an error naming it;
a device that never arrives makes them stop after ``timeout`` seconds
(``TOOLKIT_COLLECTIVE_TIMEOUT``, 60 by default). Nothing is left waiting."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ...config import env_int
from ...ir.collectives import DEFAULT_TIMEOUT_S, DeviceRun, run_devices
from ...ir.evaluator import evaluate_computation
from ...ir.nodes import Module
from .interpreter import coerce_arguments, flatten_value


def device_counts(module: Module, replicas: int | None, partitions: int | None
                  ) -> tuple[int, int]:
    """The run's replicas and partitions: as given, else the module header's
    ``replica_count``/``num_partitions`` (XLA's), else 1."""
    header = dict(module.attributes)

    def count(given, key):
        if given is not None:
            return int(given)
        text = header.get(key)
        return int(text) if text is not None and re.fullmatch(r"\d+", text) else 1
    return count(replicas, "replica_count"), count(partitions, "num_partitions")


def run_spmd(module: Module, device_args: Sequence[Sequence[Any]], *,
             replicas: int | None = None, partitions: int | None = None,
             timeout: float | None = None) -> list[tuple[np.ndarray, ...]]:
    """Run ``module`` on every device, ``device_args[d]`` being device d's arguments (device
    ``replica * partitions + partition``). Returns each device's flattened results."""
    replicas, partitions = device_counts(module, replicas, partitions)
    devices = replicas * partitions
    if len(device_args) != devices:
        raise ValueError(
            f"module {module.name} runs on {devices} devices ({replicas} replica(s) x "
            f"{partitions} partition(s)) but arguments for {len(device_args)} were given")
    if timeout is None:
        timeout = float(env_int("TOOLKIT_COLLECTIVE_TIMEOUT", int(DEFAULT_TIMEOUT_S), 1, 86400))
    coerced = [coerce_arguments(module, args) for args in device_args]
    return run_devices(DeviceRun(replicas, partitions, timeout), lambda device: flatten_value(
        evaluate_computation(module.entry, coerced[device])))
