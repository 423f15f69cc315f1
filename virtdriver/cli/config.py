"""``virtdriver config sample``: an annotated sample configuration.

The sample comes from oslo.config's own generator over the ``virtdriver``
namespace of the ``oslo.config.opts`` entry point (setup.cfg), so it is
exactly what ``oslo-config-generator --namespace virtdriver`` writes: every
option commented out at its default, with its help text.
"""

from __future__ import annotations

import argparse
import io
import sys

from oslo_config import cfg, generator

from virtdriver.cli.errors import CommandError

#: The ``oslo.config.opts`` entry point naming :func:`virtdriver.conf.list_opts`.
NAMESPACE = "virtdriver"


def sample_config() -> str:
    """The sample configuration file's text."""
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(args=["--namespace", NAMESPACE], project="virtdriver",
         default_config_files=[], default_config_dirs=[], use_env=False)
    out = io.StringIO()
    generator.generate(conf, output_file=out)
    return out.getvalue()


def run_config(args: argparse.Namespace) -> int:
    """``config sample``: print the sample, or write it to ``--output``.

    Raises:
        CommandError: ``--output`` cannot be written (exit 2), a full
            disk included.
    """
    text = sample_config()
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as exc:
            if exc.filename is not None:  # the path: main says "cannot use"
                raise
            # ENOSPC at write or close names no file.
            raise CommandError(
                f"--output {args.output}: cannot write the sample "
                f"({exc.strerror or exc}); free space or give another "
                "path") from None
    else:
        sys.stdout.write(text)
    return 0
