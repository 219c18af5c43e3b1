"""Data shipped with toolkit (installed as ``toolkit._data``): GPU spec sheets."""
