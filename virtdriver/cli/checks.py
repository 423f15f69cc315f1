"""Refuse command-line options that would be silently ignored.

A ``report`` option that the chosen driver does not read (``--inventory``
with the fake driver, ``--uri`` with ironic), or a combination that cannot
both apply (``--snapshot`` with ``--uri``), is an error rather than a no-op.
Config *files* are not checked this way: one file may serve many drivers.
``--placement-url`` must be an http(s) URL with a host, no ``%``
(:mod:`virtdriver.placement.endpoint`) and no user name or password
(keystone options carry credentials).
"""

from __future__ import annotations

import argparse
import urllib.parse
from collections.abc import Mapping

from virtdriver.capabilities.traits.names import MAX_TRAIT_LENGTH
from virtdriver.cli.errors import CommandError
from virtdriver.conf.overrides import COMMAND_LINE_OPTIONS, flag
from virtdriver.conf.reader import option_name
from virtdriver.redact import has_userinfo, redact_userinfo

#: ``report`` options only some drivers read: dest -> those drivers.
#: Any other driver (an out-of-tree one) is given the options only.
DRIVER_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "uri": ("libvirt",),
    "snapshot": ("libvirt",),
    "cpu_map": ("libvirt",),
    "flat": ("libvirt", "fake"),
    "profile": ("libvirt",),
    "host_spec": ("fake",),
    "inventory": ("ironic",),
}

#: Config options an in-tree driver never reads, by driver: the ironic
#: driver reads ``[compute] image_type_exclude_list`` only.
UNREAD_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "ironic": tuple(dest for dest in COMMAND_LINE_OPTIONS
                    if dest != "image_type_exclude_list"),
}


def check_options(args: argparse.Namespace) -> None:
    """Raise :class:`CommandError` for an option that would not apply."""
    if getattr(args, "snapshot", None) and args.uri:
        raise CommandError(
            "--snapshot replays a recorded host instead of opening libvirt, "
            "so --uri would not apply; give one or the other")
    if hasattr(args, "driver"):  # report, sync, claims, explain, image-check
        _check_report(args)
    if (getattr(args, "node", None) is not None
            and args.command in ("explain", "image-check")
            and args.driver == "libvirt"):
        raise CommandError(
            f"--node picks a node of a driver other than libvirt; {args.command}"
            " with libvirt answers for this host: drop --node, or give "
            "--driver")
    if getattr(args, "output", None) and getattr(args, "format", None) \
            == "json" and args.command == "report":
        raise CommandError(
            f"--output {args.output} writes the tree as a picture (what "
            "--format dot draws), so --format json would not apply; drop "
            "--format json, or drop --output to print the JSON")
    if getattr(args, "placement_url", None) is not None:
        placement_url(args.placement_url)
    if args.command == "explain":
        _check_trait_lengths(args.traits)


def _check_trait_lengths(traits: list[str]) -> None:
    """Refuse a name no trait can have (longer than Placement allows) at
    once, before the host is read and without echoing all of it."""
    for name in traits:
        if len(name) > MAX_TRAIT_LENGTH:
            raise CommandError(
                f"explain: {name[:40]!r}... is {len(name)} characters long, "
                f"and no trait name is longer than {MAX_TRAIT_LENGTH} "
                "(Placement's limit); check the name")


def placement_url(url: str) -> str:
    """``url`` without a trailing ``/`` if it is an http(s) URL with a
    host and nothing after the path; else :class:`CommandError`."""
    # Imported here: a command with no Placement imports nothing of it.
    from virtdriver.placement.endpoint import EXAMPLE, endpoint_problem

    example = f"give Placement's endpoint, e.g. {EXAMPLE}"
    if "@" in url:
        shown = (redact_userinfo(url) if has_userinfo(url)
                 else "***@" + url.rpartition("@")[2])
        raise CommandError(
            f"--placement-url {shown!r} carries a user name "
            "or password, which virtdriver neither sends nor records; give "
            "the URL without it, and keystone credentials as the [placement] "
            "auth options of a --config-file (auth_type, auth_url, "
            "username, password; `virtdriver help configuration`)")
    problem = endpoint_problem(url)
    if problem:
        raise CommandError(f"--placement-url {url!r} {problem}; {example}")
    parts = urllib.parse.urlsplit(url)
    if parts.query or parts.fragment:
        raise CommandError(f"--placement-url {url!r} has a query or a "
                           f"fragment; {example}")
    return url.rstrip("/")


def _check_report(args: argparse.Namespace) -> None:
    for dest, drivers in DRIVER_OPTIONS.items():
        if (getattr(args, dest, None) in (None, False)
                or args.driver in drivers):
            continue
        raise CommandError(
            f"{flag(dest)} applies only to --driver {' or '.join(drivers)}, "
            f"not to --driver {args.driver}; drop {flag(dest)} or use "
            f"--driver {drivers[0]}")
    for dest in UNREAD_OPTIONS.get(args.driver, ()):
        if getattr(args, dest, None) is not None:
            raise CommandError(
                f"{flag(dest)} does not apply to --driver {args.driver}: it "
                f"does not read {option_name(*COMMAND_LINE_OPTIONS[dest])}; "
                f"drop {flag(dest)}")
