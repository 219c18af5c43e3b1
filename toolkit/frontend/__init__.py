"""Tracing frontend: abstract values, tracers, NumPy protocols, pytrees, signatures."""
