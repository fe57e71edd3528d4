"""Run one benchmark script against two revisions of the package, side by side in one run.

Run: ``python benchmarks/compare_revisions.py --base REV [--head REV] [--rounds 2] -- bench_dataset.py --rows 500000``;
more scripts in the same run with ``--also "bench_io_manager.py --iterations 50"`` (repeatable).

The base revision (and ``--head`` when given; else the current tree, uncommitted
changes included) is checked out into a temporary git worktree; each benchmark
script (always the current tree's, so both sides measure the same thing) runs
alternately with the base's and the head's package first on ``PYTHONPATH``
(Spark's Python workers and the processes a script starts inherit it; the
scripts take the package from there, see ``_common.package_root``), ``--rounds``
times each, and both outputs are printed in full, labelled. Compare the ratios
each script prints: they are measured against the same reference in the same
process, so they survive a loaded machine better than absolute times.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _run(tree: str, script: str, args: list[str]) -> str:
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, script), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout + (f"\n[stderr]\n{done.stderr[-2000:]}" if done.returncode else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision to compare against (e.g. a commit or main~5)")
    parser.add_argument("--head", default=None, help="git revision to measure (default: the current tree)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--also", action="append", default=[], help='another script and its arguments, e.g. "bench_x.py --rows 10"'
    )
    parser.add_argument("script", help="benchmark script in benchmarks/, e.g. bench_dataset.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script (after --)")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    runs = [(ns.script, args)] + [(shlex.split(also)[0], shlex.split(also)[1:]) for also in ns.also]
    with tempfile.TemporaryDirectory(prefix="bench-revisions-") as tmp:
        trees = [("base " + ns.base, _worktree(os.path.join(tmp, "base"), ns.base))]
        trees.append(("head " + ns.head, _worktree(os.path.join(tmp, "head"), ns.head)) if ns.head else ("head", ROOT))
        try:
            for script, script_args in runs:
                for round_ in range(1, ns.rounds + 1):
                    for label, tree in trees:
                        print(f"===== round {round_}: {label}: {script} {' '.join(script_args)}", flush=True)
                        print(_run(tree, script, script_args), flush=True)
        finally:
            for _label, tree in trees:
                if tree != ROOT:
                    subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)
    return 0


def _worktree(path: str, revision: str) -> str:
    """``revision`` checked out (detached) at ``path``, a git worktree of this repository."""
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, revision], check=True, capture_output=True)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
