"""Analyses and transformations over the IR."""
