"""The ``[placement]`` section: where Placement is and how to log in.

The same keystoneauth1 options every OpenStack compute service reads
(``keystoneauth1.loading``): the session's (``cafile``, ``insecure``,
``timeout``, …), the auth plugin's (``auth_type``, then that plugin's own:
``auth_url``, ``username``, ``password``, ``project_name``, …) and the
adapter's (``valid_interfaces``, ``region_name``, ``endpoint_override``,
…).  :func:`placement_client` turns them into a
:class:`~virtdriver.placement.client.PlacementClient`:

* ``auth_type`` (or ``auth_section``) set: a keystone-authenticated
  session, the endpoint from the service catalog unless
  ``endpoint_override`` names it;
* only ``endpoint_override`` set: that URL with the ``admin`` token
  Placement's ``noauth2`` mode expects (as ``--placement-url``), with the
  same session options (``cafile``, ``certfile``, ``keyfile``,
  ``insecure``, ``timeout``);
* neither: ``None`` — the caller's default (``virtdriver sync`` embeds
  Placement).

The auth plugin's options depend on ``auth_type``, so they are registered
when the client is made (keystoneauth does it); the sample config lists
the ``password`` plugin's, and a file may use any installed plugin's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from virtdriver.conf.reader import (
    DOCS, ConfigError, option_name, sources, value_reason)
from virtdriver.conf.substitution import (
    SUBSTITUTION_ERRORS, substitution_reason)
from virtdriver.placement.endpoint import EXAMPLE, endpoint_problem

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient

GROUP = "placement"
#: Defaults that differ from keystoneauth's: the adapter's as Nova sets
#: them; a request timeout (keystoneauth's default is none: a Placement
#: that stops answering would hang the command).
ADAPTER_DEFAULTS = {"service_type": "placement",
                    "valid_interfaces": ["internal", "public"]}
SESSION_DEFAULTS = {"timeout": 30.0}
#: The auth plugin whose options the sample config shows.
SAMPLE_PLUGIN = "password"


def register_placement_opts(conf: cfg.ConfigOpts) -> None:
    """Register the session, auth and adapter options on ``[placement]``."""
    ks_loading.register_session_conf_options(conf, GROUP)
    ks_loading.register_auth_conf_options(conf, GROUP)
    ks_loading.register_adapter_conf_options(conf, GROUP)
    for name, value in {**SESSION_DEFAULTS, **ADAPTER_DEFAULTS}.items():
        conf.set_default(name, value, group=GROUP)


def sample_opts() -> list[cfg.Opt]:
    """The options of a sample ``[placement]`` section (for
    oslo-config-generator): session, auth, the ``password`` plugin's and
    the adapter's, each once."""
    session = ks_loading.get_session_conf_options()
    cfg.set_defaults(session, **SESSION_DEFAULTS)
    adapter = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(adapter, **ADAPTER_DEFAULTS)
    return _unique([
        *session,
        *ks_loading.get_auth_common_conf_options(),
        *ks_loading.get_auth_plugin_conf_options(SAMPLE_PLUGIN),
        *adapter])


def known_opts() -> list[cfg.Opt]:
    """Every option a ``[placement]`` section may set: the sample's, the
    deprecated adapter names, and the options of every installed auth
    plugin (which ones apply depends on ``auth_type``)."""
    opts = [*sample_opts(),
            *ks_loading.get_adapter_conf_options(include_deprecated=True)]
    for name in sorted(ks_loading.get_available_plugin_names()):
        try:
            opts.extend(ks_loading.get_auth_plugin_conf_options(name))
        except Exception:   # noqa: BLE001 — a plugin that cannot load
            continue        # has no options to know
    return _unique(opts)


class KnownNames(Mapping[str, frozenset[str]]):
    """Names a file may use per section, ``[placement]``'s computed only
    when a file has that section (loading every auth plugin costs ~0.2 s).
    """

    def __init__(self, known: Mapping[str, frozenset[str]], lazy) -> None:
        self._known = dict(known)
        self._lazy = lazy

    def __getitem__(self, group: str) -> frozenset[str]:
        if group == GROUP and GROUP not in self._known:
            self._known[GROUP] = self._lazy()
        return self._known[group]

    def __iter__(self) -> Iterator[str]:
        return iter({*self._known, GROUP})

    def __len__(self) -> int:
        return len({*self._known, GROUP})


def configured(conf: cfg.ConfigOpts) -> bool:
    """Whether ``[placement]`` names a Placement (auth or endpoint)."""
    return uses_keystone(conf) or bool(conf[GROUP].endpoint_override)


def uses_keystone(conf: cfg.ConfigOpts) -> bool:
    """Whether ``[placement]`` logs in with keystone (``auth_type`` or
    ``auth_section`` set)."""
    return bool(conf[GROUP].auth_type or conf[GROUP].auth_section)


def placement_client(conf: cfg.ConfigOpts) -> PlacementClient | None:
    """A client for the Placement ``[placement]`` names, or ``None`` when
    it names none (module doc).  Nothing is sent yet.

    Raises:
        ConfigError: see :func:`check_values` and :func:`placement_adapter`.
    """
    from virtdriver.placement.client import PlacementClient

    check_values(conf)
    if uses_keystone(conf):
        return PlacementClient(placement_adapter(conf))
    if not configured(conf):
        return None
    _no_userinfo(conf[GROUP].endpoint_override)
    # The session options (cafile, certfile, keyfile, insecure, timeout…)
    # apply with the noauth2 token as with keystone.
    session = ks_loading.load_session_from_conf_options(conf, GROUP)
    return PlacementClient.from_url(conf[GROUP].endpoint_override,
                                    session=session)


def _no_userinfo(url: str | None) -> None:
    """Refuse an ``endpoint_override`` with a user name or password in it:
    it would be printed and recorded (the keystone options carry
    credentials)."""
    if url and "@" in url:
        raise ConfigError([
            f"{option_name(GROUP, 'endpoint_override')} = "
            f"***@{url.rpartition('@')[2]} carries a user name or password; "
            f"remove it, and give keystone credentials as the [{GROUP}] auth "
            f"options (auth_type, username, password; see {DOCS})"])


def check_values(conf: cfg.ConfigOpts) -> None:
    """Refuse ``[placement]`` values that cannot work, where they are read:
    one that is not of its option's type (``timeout = abc``,
    ``insecure = maybe``, ``tls_min_version = SSLv2``), a ``timeout``
    that is not a number of seconds above 0, an ``endpoint_override``
    that is not an http(s) URL with a host or holds a ``%``
    (:func:`~virtdriver.placement.endpoint.endpoint_problem`).

    Raises:
        ConfigError: one line per bad value, naming option and value.
    """
    group = conf[GROUP]
    problems = []
    for name in group:  # the session's and the adapter's options
        try:
            getattr(group, name)
        except cfg.ConfigFileValueError as exc:
            problems.append(f"{option_name(GROUP, name)}: "
                            f"{value_reason(exc)}; {_allowed(name)}")
    if problems:
        raise ConfigError(problems, sources(conf))
    timeout = group.timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        problems.append(f"{option_name(GROUP, 'timeout')} = {timeout:g} is "
                        "not a number of seconds above 0; give e.g. 30")
    url = group.endpoint_override
    problem = url and endpoint_problem(url)
    if problem:
        problems.append(
            f"{option_name(GROUP, 'endpoint_override')} = {url!r} {problem}; "
            f"give Placement's endpoint, e.g. {EXAMPLE}")
    if problems:
        raise ConfigError(problems, sources(conf))


def _allowed(name: str) -> str:
    """What ``[placement] name`` accepts, as the fix for a bad value."""
    opt = next((opt for opt in (
        *ks_loading.get_session_conf_options(),
        *ks_loading.get_adapter_conf_options(include_deprecated=True))
        if opt.dest == name), None)
    choices = getattr(getattr(opt, "type", None), "choices", None)
    if isinstance(opt, cfg.BoolOpt):
        return "set it to true or false"
    if choices:
        named = [str(choice) for choice in choices if choice is not None]
        return (f"set it to {' or '.join(named)}"
                + (", or leave it unset" if None in choices else ""))
    return f"correct it (see {DOCS})"


def placement_adapter(conf: cfg.ConfigOpts) -> ks_adapter.Adapter:
    """The keystoneauth1 adapter ``[placement]`` describes: its auth
    plugin, session and adapter options; no retries (the sync decides),
    errors returned, not raised.  Nothing is sent yet.

    Raises:
        ConfigError: an unknown ``auth_type``, a plugin option it needs
            missing, a bad ``valid_interfaces`` or version combination.
    """
    group = conf[GROUP]
    _no_userinfo(group.endpoint_override)
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
        session = ks_loading.load_session_from_conf_options(
            conf, GROUP, auth=auth)
        return ks_loading.load_adapter_from_conf_options(
            conf, GROUP, session=session, connect_retries=0,
            status_code_retries=0, raise_exc=False)
    except ks_exc.NoMatchingPlugin as exc:
        raise ConfigError([
            f"{option_name(GROUP, 'auth_type')} = {exc.name!r} is not an "
            "installed keystoneauth1 plugin; use one of "
            f"{', '.join(sorted(ks_loading.get_available_plugin_names()))}"
        ]) from None
    except ks_exc.MissingRequiredOptions as exc:
        names = ", ".join(option_name(GROUP, o.dest) for o in exc.options)
        them = "it" if len(exc.options) == 1 else "them"
        raise ConfigError([
            f"[{GROUP}] auth_type = {group.auth_type or '(auth_section)'} "
            f"needs {names}; set {them} (see {DOCS})"]) from None
    except SUBSTITUTION_ERRORS as exc:  # an auth plugin's option: pa$word
        raise ConfigError([f"[{GROUP}] (auth_type = {group.auth_type}): "
                           f"{substitution_reason(exc)}"],
                          sources(conf)) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError([f"[{GROUP}]: {exc}; correct it (see {DOCS})"]) \
            from None


def describe(conf: cfg.ConfigOpts) -> str:
    """How ``[placement]`` reaches Placement, for the command's output."""
    group = conf[GROUP]
    if not uses_keystone(conf):
        return f"Placement at {group.endpoint_override} ([{GROUP}] " \
               "endpoint_override, noauth2 admin token)"
    where = (group.endpoint_override
             or "the service catalog, interface "
             + "/".join(group.valid_interfaces or ["public"])
             + (f", region {group.region_name}" if group.region_name
                else ""))
    return f"Placement at {where} ([{GROUP}] auth_type = " \
           f"{group.auth_type or '(from auth_section)'})"


def _unique(opts: list[cfg.Opt]) -> list[cfg.Opt]:
    seen: dict[str, cfg.Opt] = {}
    for opt in opts:
        seen.setdefault(opt.dest, opt)
    return list(seen.values())
