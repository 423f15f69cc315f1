"""``virtdriver snapshot``: record what the driver reads from this host."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.cli.host import Opener, read_with
from virtdriver.drivers.libvirt.recorder import record_host
from virtdriver.fakelibvirt.snapshot import write_snapshot


def run_snapshot(args: argparse.Namespace, config: TraitConfig, *,
                 opener: Opener, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """Record the host into ``args.output``."""
    out = out or sys.stdout
    err = err or sys.stderr
    recorded = read_with(args.uri, opener, err,
                     lambda conn, uri: record_host(conn, uri, config))
    if isinstance(recorded, int):
        return recorded
    documents, choice = recorded
    manifest = write_snapshot(args.output, documents, choice.uri)
    out.write(f"recorded {choice.uri} ({choice.reason}) into {manifest.parent}:"
              f" host capabilities, {len(documents.domain_capabilities)} "
              f"domain capabilities document(s), "
              f"{len(documents.domain_capabilities_errors)} refused, "
              f"{len(documents.node_devices)} node device(s)\n")
    return 0
