"""Command line: ``python -m toolkit demo [--out DIR] [--backend NAME] [--scale S]``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile the standard workloads and write a report")
    demo.add_argument(
        "--out", default="toolkit-report", help="output folder (default: %(default)s)"
    )
    demo.add_argument("--backend", default=None, help="backend name (default: the best available)")
    demo.add_argument("--scale", type=float, default=0.25,
                      help="fraction of the benchmark sizes to use (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .backends import BackendUnavailableError
        from .demo import main as demo_main

        try:
            demo_main(args.out, args.backend, args.scale)
        except BackendUnavailableError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
