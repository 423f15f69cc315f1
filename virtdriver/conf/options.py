"""The options virtdriver reads, OpenStack-shaped, and how to load them.

Options live on a :class:`oslo_config.cfg.ConfigOpts` made by
:func:`make_conf`; nothing is registered on oslo's global ``CONF``, so
two configurations (a test's and the command's) never meet.

``[placement]`` holds keystoneauth1's session, auth and adapter options
(:mod:`virtdriver.conf.placement`), registered through
``keystoneauth1.loading`` as every compute service does.

Nova keeps ``reserved_host_memory_mb``, ``reserved_huge_pages`` and the
allocation ratios in ``[DEFAULT]``; here they are in ``[compute]``, and a
Nova-style ``[DEFAULT]`` setting is still read (oslo's deprecated group).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from os import PathLike

from oslo_config import cfg

from virtdriver.capabilities.traits.config import CPU_MODES
from virtdriver.conf import devices
from virtdriver.conf import host as host_option
from virtdriver.conf import placement
from virtdriver.conf.disk import (
    DEFAULT_DISK_ALLOCATION_RATIO, DEFAULT_RESERVED_HOST_DISK_MB)
# The defaults live beside the oslo-free default configuration; callers
# have always found them here too.
from virtdriver.conf.defaults import (
    DEFAULT_CPU_ALLOCATION_RATIO,
    DEFAULT_RAM_ALLOCATION_RATIO,
    DEFAULT_RESERVED_HOST_MEMORY_MB,
    PROVIDER_CONFIG_LOCATION,
    VIRT_TYPES,
    state_dir_from,  # noqa: F401 (re-exported)
)
from virtdriver.conf.reader import sources
from virtdriver.conf.substitution import (
    SUBSTITUTION_ERRORS, raw_culprits, substitution_problems,
    substitution_reason)
from virtdriver.conf.files import (
    file_problems, known_options, unknown_options)
from virtdriver.conf.reader import ConfigError
from virtdriver.conf.trust import untrusted_config

COMPUTE_OPTS = [
    cfg.StrOpt(
        "cpu_dedicated_set",
        help="Host CPUs for pinned guest CPUs (PCPU inventory), e.g. "
             "'4-15,^8'. Unset: no dedicated CPUs. When set and "
             "cpu_shared_set is not, the host offers no shared CPUs."),
    cfg.StrOpt(
        "cpu_shared_set",
        help="Host CPUs for floating guest CPUs (VCPU inventory), e.g. "
             "'0-3'. Unset: every online host CPU when cpu_dedicated_set "
             "is unset too, else none."),
    cfg.IntOpt(
        "reserved_host_memory_mb", default=DEFAULT_RESERVED_HOST_MEMORY_MB,
        deprecated_group="DEFAULT",
        help="Memory (MiB) kept for the host, taken from NUMA cell 0 "
             "first, then the next cells in id order."),
    cfg.MultiStrOpt(
        "reserved_huge_pages", default=[], deprecated_group="DEFAULT",
        help="Pages kept for the host, one entry per NUMA node and page "
             "size: 'node:0,size:2048,count:64' (size in KiB, or with a "
             "unit: 2MB, 1GB). Repeat the option for more entries."),
    cfg.FloatOpt(
        "cpu_allocation_ratio", default=DEFAULT_CPU_ALLOCATION_RATIO,
        deprecated_group="DEFAULT",
        help="Shared guest CPUs per shared host CPU (VCPU overcommit); "
             "greater than 0."),
    cfg.FloatOpt(
        "ram_allocation_ratio", default=DEFAULT_RAM_ALLOCATION_RATIO,
        deprecated_group="DEFAULT",
        help="Guest memory per host memory (overcommit); greater than 0."),
    cfg.IntOpt(
        "reserved_host_disk_mb", default=DEFAULT_RESERVED_HOST_DISK_MB,
        deprecated_group="DEFAULT",
        help="Disk (MiB) kept for the host: the DISK_GB inventory's "
             "reserved, rounded up to whole GiB."),
    cfg.FloatOpt(
        "disk_allocation_ratio", default=DEFAULT_DISK_ALLOCATION_RATIO,
        deprecated_group="DEFAULT",
        help="Guest disk per host disk (DISK_GB overcommit); greater than "
             "0."),
    cfg.ListOpt(
        "image_type_exclude_list", default=[],
        help="Image formats not offered even when the driver supports "
             "them, e.g. 'raw,qcow2'."),
    cfg.StrOpt(
        "provider_config_location", default=PROVIDER_CONFIG_LOCATION,
        help="Directory of provider config files (YAML, schema 1.0): "
             "operators' own CUSTOM_ traits and inventories for providers; "
             "deleting an entry removes what it added on the next update. "
             "A missing directory is no configuration."),
]

LIBVIRT_OPTS = [
    cfg.StrOpt(
        "connection_uri", default="",
        help="libvirt URI to open. Empty: qemu:///system if a daemon "
             "answers, else qemu:///embed, else test:///default."),
    cfg.StrOpt(
        "nodedev_uri", default="",
        help="libvirt URI to read host devices from when connection_uri "
             "has no node-device API (qemu:///embed). Empty: "
             "nodedev:///system for root, else nodedev:///session; if no "
             "daemon answers, devices are unknown (none added or removed)."),
    cfg.StrOpt(
        "virt_type", choices=VIRT_TYPES,
        help="Guest virt type. Unset: kvm when libvirt offers kvm guests "
             "of the host arch, else qemu."),
    cfg.StrOpt(
        "cpu_mode", choices=CPU_MODES,
        help="Guest CPU mode. Unset: host-model for kvm and qemu, none "
             "for other virt types."),
    cfg.ListOpt(
        "cpu_models", default=[],
        help="Named CPU models for cpu_mode = custom, in preference "
             "order."),
    cfg.ListOpt(
        "cpu_model_extra_flags", default=[],
        help="CPU features to add ('+flag' or 'flag') or remove ('-flag') "
             "for guests."),
    cfg.ListOpt(
        "hw_machine_type", default=[],
        help="Machine types per guest arch, 'arch=machine' pairs, e.g. "
             "'x86_64=q35,aarch64=virt'."),
]

VIRTDRIVER_OPTS = [
    cfg.StrOpt(
        "state_dir",
        help="Directory for virtdriver's state (qemu:///embed root, "
             "caches); wins over $VIRTDRIVER_STATE_DIR. Unset: "
             "$VIRTDRIVER_STATE_DIR, else "
             "/var/lib/virtdriver for root, else "
             "~/.local/state/virtdriver."),
]


#: ``[DEFAULT]`` options (the section is shared: oslo.log's are there too,
#: so it is not checked for unknown names).
DEFAULT_OPTS = [
    cfg.HostDomainOpt(
        "host", sample_default=host_option.SAMPLE_DEFAULT,
        help="This compute host's name, the node name (and compute node "
             "provider name) the libvirt driver reports, as Nova's "
             "[DEFAULT] host. Unset: the machine's host name."),
]


def _own_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("compute", COMPUTE_OPTS), ("libvirt", LIBVIRT_OPTS),
            ("virtdriver", VIRTDRIVER_OPTS), ("pci", devices.PCI_OPTS),
            ("devices", devices.DEVICES_OPTS)]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Every option by group, in oslo-config-generator's form
    (``[placement]`` with the ``password`` auth plugin's options)."""
    return [("DEFAULT", DEFAULT_OPTS), *_own_opts(),
            (placement.GROUP, placement.sample_opts())]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every virtdriver option on ``conf``; the auth plugin's
    ``[placement]`` options follow ``auth_type`` and are registered when
    a client is made (:func:`virtdriver.conf.placement.placement_client`).
    """
    conf.register_opts(DEFAULT_OPTS)
    register_log_opts(conf)
    for group, opts in _own_opts():
        conf.register_opts(opts, group=group)
    placement.register_placement_opts(conf)


def register_log_opts(conf: cfg.ConfigOpts) -> None:
    """Register oslo.log's options (``[DEFAULT] log_file``, ``debug``,
    ``use_json``, …; :mod:`virtdriver.cli.logs` uses them) without the
    stderr handler oslo.log puts on a root logger that has none (the
    command prints warnings itself)."""
    import logging

    from oslo_log import log as oslo_log

    root = logging.getLogger()
    before = list(root.handlers)
    oslo_log.register_options(conf)
    for handler in list(root.handlers):
        if handler not in before:
            root.removeHandler(handler)


def dir_files(dirs: Iterable[str | PathLike[str]]) -> list[str]:
    """The ``*.conf`` files of each of ``dirs``, in name order per
    directory (what oslo.config reads from a ``--config-dir``)."""
    return [path for directory in dirs
            for path in sorted(glob.glob(os.path.join(os.fspath(directory),
                                                      "*.conf")))]


def make_conf(args: Sequence[str] | None = None,
              config_files: Iterable[str | PathLike[str]] = (),
              config_dirs: Iterable[str | PathLike[str]] = ()
              ) -> cfg.ConfigOpts:
    """A new ``ConfigOpts`` with every option, read from ``config_files``
    and then the ``*.conf`` files of each of ``config_dirs`` (name order),
    as oslo.config's ``--config-file`` and ``--config-dir`` read them.

    ``args`` are oslo command-line arguments (``--config-file``,
    ``--config-dir``); ``None`` means none, never ``sys.argv``.  No
    default locations are searched here and the environment is not read:
    what is configured is exactly what is passed (the command finds the
    default locations with :mod:`virtdriver.conf.locations`).

    Values are converted when read; :func:`virtdriver.conf.trait_config`
    and :func:`virtdriver.conf.pinning_config` report bad ones.

    Raises:
        ConfigError: a file or directory another user could write
            (:mod:`virtdriver.conf.trust`); a file is missing, a
            directory, unreadable, not UTF-8
            or not INI syntax, a config directory is not one, or a file
            sets an option virtdriver does not have in a section
            virtdriver owns (see :mod:`virtdriver.conf.files`); every such
            problem is listed.  A value whose ``$`` names no option
            (:mod:`virtdriver.conf.substitution`).
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    files = [str(path) for path in config_files]
    dirs = [str(path) for path in config_dirs]
    problems = [f"config directory {path} does not exist or is not a "
                "directory; check the --config-dir path"
                for path in dirs if not os.path.isdir(path)]
    files_of_dirs = [] if problems else dir_files(dirs)
    # Before reading a byte: configuration others could write is refused.
    refused = untrusted_config(files, dirs, files_of_dirs)
    if refused:
        raise ConfigError(problems + refused)
    problems += [problem for path in files + files_of_dirs
                 for problem in file_problems(path)]
    if problems:
        raise ConfigError(problems)
    try:
        conf(args=list(args or ()), project="virtdriver",
             default_config_files=files, default_config_dirs=dirs,
             use_env=False, validate_default_values=True)
    except cfg.ConfigFilesNotFoundError as exc:
        raise ConfigError([
            f"cannot read config file {', '.join(exc.config_files)}: it "
            "does not exist or is not readable; check the --config-file "
            "path"]) from None
    except cfg.ConfigDirNotFoundError as exc:
        raise ConfigError([f"config directory {exc.config_dir} does not "
                           "exist; check the --config-dir path"]) from None
    except cfg.ConfigFileParseError as exc:
        raise ConfigError([f"{exc.config_file} is not an INI file: "
                           f"{exc.msg}; fix its syntax"]) from None
    except SUBSTITUTION_ERRORS as exc:  # oslo.log's options, read here
        where = ", ".join(raw_culprits(files + files_of_dirs, exc))
        raise ConfigError([f"{where or 'an option'}: "
                           f"{substitution_reason(exc)}"],
                          files + files_of_dirs) from None
    except (OSError, UnicodeDecodeError) as exc:
        # Changed since file_problems() looked, or a locale that is not
        # UTF-8: oslo opens files in the locale's encoding.
        raise ConfigError([f"cannot read config files "
                           f"{', '.join(files + files_of_dirs)}: {exc}; "
                           "check "
                           "them"]) from None
    known = placement.KnownNames(
        known_options(_own_opts()),
        lambda: known_options([(placement.GROUP,
                                placement.known_opts())])[placement.GROUP])
    problems = [problem
                for path in [*(conf.config_file or ()), *files_of_dirs]
                for problem in unknown_options(path, known)]
    if problems:  # each names its file
        raise ConfigError(problems)
    problems = substitution_problems(conf)
    if problems:
        raise ConfigError(problems, sources(conf))
    return conf
