"""Exit statuses and printing shared by the subcommands."""

from __future__ import annotations

import argparse
import json
from typing import Any

OK, PROBLEMS = 0, 1


def emit(args: argparse.Namespace, document: Any, text: str) -> None:
    """Print ``document`` as JSON with ``--json``, else ``text``."""
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    elif text:
        print(text)


def indent(text: str) -> str:
    """Every line of ``text`` indented by two spaces."""
    return "\n".join("  " + line for line in text.splitlines())
