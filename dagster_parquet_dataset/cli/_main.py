"""Argument parsing, dispatch, and the exit statuses: 0 fine, 1 problems found, 2 usage error."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from ..dataset import ParquetDatasetStore
from ..errors import RemoteStoreError
from ._commands import COMMANDS, PROBLEMS
from ._format import one_line
from ._store_args import STORE_ENV, open_store
from ._usage_error import UsageError

PROG = "dagster-parquet-dataset"
USAGE_ERROR = 2
#: Set to 1 to get a traceback for unexpected errors.
DEBUG_ENV = "DAGSTER_PARQUET_DATASET_DEBUG"

_DESCRIPTION = """\
Look inside Parquet datasets (manifest.json + _SUCCESS) and keep them healthy.

Exit status: 0 fine, 1 problems found (verify problems, a missing dataset, a
corrupt manifest, an unreachable store), 2 usage error."""

_EPILOG = f"""\
The store is --store PATH, --store file://PATH or --store s3://BUCKET/PREFIX
(or ${STORE_ENV}). S3 credentials come from the standard AWS chain. Global
options may come before or after the subcommand."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (and exits 2)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog[len(PROG) :].strip()
        where = f"{command}: " if command else ""
        self.exit(USAGE_ERROR, f"{PROG}: error: {where}{one_line(message)} (see {self.prog} --help)\n")


def _add_globals(parser: argparse.ArgumentParser, *, sub: bool) -> None:
    # On a subcommand the defaults are SUPPRESS, so an option given before the
    # subcommand is not reset when it is not repeated after it.
    def default(value: object) -> object:
        return argparse.SUPPRESS if sub else value

    group = parser.add_argument_group("global options")
    group.add_argument(
        "--store",
        metavar="PATH|URL",
        default=default(os.environ.get(STORE_ENV) or None),
        help=f"the store: a folder, file://PATH or s3://BUCKET/PREFIX (default: ${STORE_ENV})",
    )
    group.add_argument(
        "--endpoint-url",
        default=default(None),
        help=(
            "S3-compatible endpoint, e.g. http://127.0.0.1:9000 "
            "(default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS)"
        ),
    )
    group.add_argument("--region", default=default(None), help="the bucket's region (default: the AWS chain's)")
    group.add_argument(
        "--json", action="store_true", default=default(False), help="print JSON for machines instead of tables"
    )
    group.add_argument(
        "--delta-log",
        action="store_true",
        default=default(False),
        help="commits made here (compact) also write the dataset's Delta log (docs/delta.md)",
    )


def _version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        dest="dataset_version",
        type=int,
        default=None,
        metavar="N",
        help="a retained past version instead of the live one",
    )


def _filter_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--filter``, repeatable (the filters are ANDed); ``what`` opens its help."""
    parser.add_argument("--filter", action="append", metavar='"COL OP VALUE"', help=f"{what}; repeat to AND them")


def _as_of_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--as-of",
        dest="as_of",
        default=None,
        metavar="TIME",
        help=(
            f"{what} at TIME: the version live then (the newest committed at or before it, by the manifests' "
            "created_at_utc). TIME is ISO-8601 with a time zone, e.g. 2026-03-01T12:00:00Z or "
            "2026-03-01T14:00:00+02:00; a time without a zone is refused, not taken as UTC"
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands ls, show, history, verify, plan, vacuum, compact, sync-delta-log, head)."""
    from .. import __version__

    parser = _Parser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    _add_globals(parser, sub=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(name: str, help: str) -> argparse.ArgumentParser:  # noqa: A002 - argparse's own name
        sub = commands.add_parser(name, help=help, description=help)
        _add_globals(sub, sub=True)
        return sub

    ls = command(
        "ls",
        "list the datasets under a prefix, one line per asset (its partition datasets together): partitions, "
        "versions, rows, files, bytes, newest run id, age; the same columns whatever the store",
    )
    ls.add_argument(
        "prefix", nargs="?", default="", type=_prefix_arg, metavar="PREFIX", help="a folder of the store (default: all)"
    )
    grouping = ls.add_mutually_exclusive_group()
    grouping.add_argument(
        "--assets",
        dest="assets",
        action="store_true",
        default=None,
        help="one line per asset, its partition datasets together (the default)",
    )
    grouping.add_argument(
        "--datasets",
        dest="assets",
        action="store_false",
        help="one line per dataset, partitions included (the same columns)",
    )

    show = command(
        "show",
        "summarize a dataset's manifest (schema, partitioning, file sizes, operation, run id), or, for an asset "
        "or folder holding datasets, their partitions, versions, rows, bytes and last run",
    )
    show.add_argument("key", type=_key_arg, metavar="KEY")
    _version_option(show)
    _as_of_option(show, "show the dataset")

    history = command("history", "list a dataset's retained versions, newest first")
    history.add_argument("key", type=_key_arg, metavar="KEY")
    _as_of_option(history, "list only the versions up to the one live")

    verify = command("verify", "check every part against the manifest (exists, size, footer rows, schema, statistics)")
    _keys_options(verify, "verify")
    _version_option(verify)

    plan = command("plan", "show which files a filtered read selects and which it prunes")
    plan.add_argument("key", type=_key_arg, metavar="KEY")
    _filter_option(plan, "a filter such as 'id > 10', \"region in (eu, us)\" or 'day >= 2024-05-01'")
    _version_option(plan)

    vacuum = command("vacuum", "delete files no retained version references")
    _keys_options(vacuum, "vacuum")
    vacuum.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    vacuum.add_argument(
        "--retain-versions",
        type=int,
        default=None,
        metavar="N",
        help="keep only the newest N versions (default: keep every version still retained)",
    )
    vacuum.add_argument(
        "--older-than",
        default=None,
        metavar="AGE",
        help="also drop versions older than AGE, with a unit: 7d, 12h, 30m, 45s",
    )
    vacuum.add_argument(
        "--grace-period",
        default="1h",
        metavar="AGE",
        help="files no version ever listed are deleted only once older than this (default: 1h)",
    )
    vacuum.add_argument(
        "--force",
        action="store_true",
        help="allow --older-than or --grace-period under the 1h safety floor",
    )

    compact = command(
        "compact",
        "rewrite small files into files near a target size, as one new version "
        "(older versions stay readable until vacuum)",
    )
    _keys_options(compact, "compact")
    compact.add_argument("--target-size", default="128MiB", metavar="SIZE", help="target file size (default: 128MiB)")
    compact.add_argument("--dry-run", action="store_true", help="show what would be rewritten, write nothing")
    _filter_option(compact, "compact only the files a read with these filters selects (as for plan)")

    sync = command(
        "sync-delta-log",
        "write what each dataset's Delta log lacks (a dataset written before delta_log was on, or a log left "
        "behind), in order; print the Delta version now live",
    )
    _keys_options(sync, "sync the Delta log of")
    sync.add_argument(
        "--asset",
        action="append",
        type=_key_arg,
        metavar="FOLDER",
        help="instead of keys: repair the one Delta table of a partitioned asset (FOLDER/_delta_log/) from its "
        "partition datasets' manifests; repeatable",
    )
    sync.add_argument(
        "--partition-column",
        action="append",
        metavar="NAME",
        help="with --asset, for an asset table not made yet: its partition column, one per folder level of the "
        "partition datasets, in order (the IO manager's: partition_expr, else 'partition'); repeatable",
    )

    head = command("head", "print a dataset's first rows, reading only the files they are in")
    head.add_argument("key", type=_key_arg, metavar="KEY")
    head.add_argument("-n", type=int, default=10, metavar="N", help="how many rows (default: 10)")
    head.add_argument(
        "--columns", action="append", metavar="COL[,COL...]", help="only these columns (comma-separated, repeatable)"
    )
    _filter_option(head, "only rows matching this filter (as for plan)")
    _version_option(head)
    return parser


def _keys_options(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "keys",
        nargs="*",
        type=_key_arg,
        metavar="KEY",
        help="a dataset, or a prefix (an asset's partitions, a group, a folder): every dataset under it",
    )
    parser.add_argument(
        "--all", action="store_true", help=f"{verb} every dataset in the store (in parallel, one progress bar)"
    )


def _prefix_arg(text: str) -> str:
    """A store folder argument: relative to the store; ``""`` (the default) is the whole store.

    Raises:
        argparse.ArgumentTypeError: an absolute path (a usage error, exit status 2).
    """
    if text.startswith("/"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is an absolute path; keys are relative to the store (--store), e.g. "
            f"{text.lstrip('/') or 'sales/orders'!r}"
        )
    return text


def _key_arg(text: str) -> str:
    """A dataset key or prefix argument: relative to the store and not empty (a trailing ``/`` is fine).

    Raises:
        argparse.ArgumentTypeError: an absolute or empty key (a usage error, exit status 2).
    """
    if not text.strip("/"):
        raise argparse.ArgumentTypeError(f"{text!r} is an empty key; name a dataset or a folder of the store")
    return _prefix_arg(text)


def _fail(message: object, status: int) -> int:
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    try:
        store = open_store(args.store, endpoint_url=args.endpoint_url, region=args.region)
        # The writers' retention (retain_versions, retain_for) is not recorded anywhere, so a commit made here
        # (compact) keeps every version unless told otherwise: the command line never drops history behind a
        # user's back. Reclaim the space with vacuum --retain-versions N or --older-than AGE.
        datasets = ParquetDatasetStore(store, retain_versions=None, retain_for=None, delta_log=args.delta_log)
        return COMMANDS[args.command](args, datasets)
    except UsageError as exc:
        return _fail(f"{exc} (see {PROG} {args.command} --help)", USAGE_ERROR)
    except (ValueError, TypeError) as exc:  # the dataset layer's answer to a bad key, version or filter
        return _fail(exc, USAGE_ERROR)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as the Python docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PROBLEMS
    except (RemoteStoreError, OSError) as exc:
        return _fail(exc, PROBLEMS)
    except ImportError as exc:  # boto3 missing for an s3:// store
        return _fail(exc, PROBLEMS)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback, unless asked for
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        return _fail(f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for a traceback)", PROBLEMS)
