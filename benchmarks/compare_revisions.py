"""Run one benchmark script against two revisions of the package, side by side in one run.

Run: ``python benchmarks/compare_revisions.py --base REV [--rounds 2] -- bench_dataset.py --rows 500000``.

The base revision is checked out into a temporary git worktree; the benchmark
script (always the current tree's, so both sides measure the same thing) runs
alternately with the base's and the current tree's package first on
``PYTHONPATH`` (Spark's Python workers inherit it), ``--rounds`` times each, and
both outputs are printed in full, labelled. Compare the ratios each script
prints: they are measured against the same reference in the same process, so
they survive a loaded machine better than absolute times.
"""

from __future__ import annotations

import argparse
import os
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
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("script", help="benchmark script in benchmarks/, e.g. bench_dataset.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script (after --)")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    with tempfile.TemporaryDirectory(prefix="bench-base-") as tmp:
        base = os.path.join(tmp, "base")
        subprocess.run(
            ["git", "-C", ROOT, "worktree", "add", "--detach", base, ns.base], check=True, capture_output=True
        )
        try:
            for round_ in range(1, ns.rounds + 1):
                for label, tree in (("base " + ns.base, base), ("head", ROOT)):
                    print(f"===== round {round_}: {label}: {ns.script} {' '.join(args)}", flush=True)
                    print(_run(tree, ns.script, args), flush=True)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
