"""`kubectl coreio` (the console script `kubectl-coreio`): flags, then one of the commands.

    kubectl coreio who-can VERB TYPE[/NAME]|URL [-n NS] [--subresource S]
    kubectl coreio why USER VERB TYPE[/NAME]|URL [-n NS] [--group G]... [--subresource S]
    kubectl coreio bindings [--problems] [-n NS | -A]

and everywhere: --kubeconfig, --context, --as, --as-group, -o json|yaml. A mistake on the command
line is one line on stderr and exit status 1, as kubectl's.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from kubectl_coreio import commands
from kubectl_coreio.commands import Output
from kubectl_coreio.connection import Connection, PluginError, ServerError, connect
from kubectl_coreio.resources import resolve

PROG = "kubectl coreio"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message} (see '{PROG} --help')\n")


def _common() -> Parser:
    common = Parser(add_help=False)
    common.add_argument(
        "--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)"
    )
    common.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    common.add_argument("--as", dest="as_user", metavar="USER", help="act as this user (impersonation)")
    common.add_argument(
        "--as-group",
        action="append",
        default=[],
        metavar="GROUP",
        help="act as a member of this group (repeatable)",
    )
    common.add_argument(
        "-o", "--output", choices=["json", "yaml"], help="print the whole answer as JSON or YAML"
    )
    return common


def _namespaced(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)")
    parser.add_argument("--subresource", default="", help="a subresource of TYPE, such as status")


def parser() -> Parser:
    common = _common()
    top = Parser(prog=PROG, description="Who may do what by coreio's RoleBindings, and why.")
    top.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    who = sub.add_parser("who-can", parents=[common], help="every subject allowed, with the binding and rule")
    who.add_argument("verb", metavar="VERB")
    who.add_argument("type", metavar="TYPE[/NAME]|URL")
    _namespaced(who)
    why = sub.add_parser("why", parents=[common], help="whether a user may, and each authorizer's decision")
    why.add_argument("user", metavar="USER")
    why.add_argument("verb", metavar="VERB")
    why.add_argument("type", metavar="TYPE[/NAME]|URL")
    why.add_argument("--group", action="append", default=[], metavar="G", help="a group of USER (repeatable)")
    _namespaced(why)
    bindings = sub.add_parser(
        "bindings", parents=[common], help="the RoleBindings you may list, with their problems"
    )
    bindings.add_argument(
        "--problems", action="store_true", help="only bindings with problems, one row per problem"
    )
    bindings.add_argument("-n", "--namespace", help="one namespace (default: every namespace you may list)")
    bindings.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace you may list")
    return top


def _version() -> str:
    try:
        return metadata.version("coreio")
    except metadata.PackageNotFoundError:
        return "unknown"


def run(args: argparse.Namespace, output: Output, connection: Connection) -> int:
    if args.command == "bindings":
        if args.all_namespaces and args.namespace:
            raise PluginError("a namespace (-n) and all namespaces (-A) cannot both be asked for")
        return commands.bindings(connection, output, args.namespace or "", args.problems)
    namespace = args.namespace or connection.namespace
    target, warning = resolve(connection, args.type, args.subresource)
    if warning:
        output.warn(warning)
    if args.command == "who-can":
        return commands.who_can(connection, output, args.verb, target, namespace)
    return commands.why(connection, output, args.user, args.group, args.verb, target, namespace)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = parser().parse_args(argv)
    output = Output(sys.stdout, sys.stderr, args.output or "")
    try:
        connection = connect(args.kubeconfig, args.context, args.as_user, args.as_group)
        sys.exit(run(args, output, connection))
    except ServerError as exc:
        sys.exit(str(exc))
    except PluginError as exc:
        sys.exit(f"error: {exc}")
