"""Reading option values so that every bad one is reported, at once.

oslo.config converts a value only when it is read, and its errors name
neither the group nor what to do.  :class:`OptionReader` reads options,
turns each failure into one line that names the option, the bad value
and the fix, and raises them together as one :class:`ConfigError`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from virtdriver.long_numbers import long_number_reason

if TYPE_CHECKING:
    from oslo_config import cfg

T = TypeVar("T")

#: Where every option is described, for "what to do" hints.
DOCS = "`virtdriver help configuration`"


class ConfigError(ValueError):
    """The configuration is unusable.

    Attributes:
        problems: one line per problem, each naming the option
            (``[group] name``), the bad value and what to do.
    """

    def __init__(self, problems: Sequence[str], sources: Sequence[str] = ()):
        self.problems = tuple(problems)
        where = f" (read from {', '.join(sources)})" if sources else ""
        if len(self.problems) == 1:
            text = f"bad configuration{where}: {self.problems[0]}"
        else:
            text = f"bad configuration{where}:" + "".join(
                f"\n  - {problem}" for problem in self.problems)
        super().__init__(text)


def option_name(group: str, name: str) -> str:
    """An option as an operator writes it: ``[group] name``."""
    return f"[{group}] {name}"


class OptionReader:
    """Reads options of one ``ConfigOpts``, collecting problems.

    Use :meth:`get` for every option, then :meth:`check`, which raises
    one :class:`ConfigError` listing every problem found.  A value that
    failed reads as ``None``; it must not be used once :meth:`check` has
    raised.
    """

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.problems: list[str] = []

    def get(self, group: str, name: str,
            parse: Callable[[Any], T] | None = None) -> T | Any:
        """The value of ``[group] name``, passed through ``parse`` if given.

        ``parse`` raises ``ValueError`` for a bad value; its message is
        recorded after the option and the value.
        """
        option = option_name(group, name)
        try:
            value = self.conf[group][name]
        except _source_value_errors() as exc:
            # oslo's own message names the file as a repr; the reason
            # behind it (the type's complaint) is the useful part.
            reason = value_reason(exc)
            self.problems.append(f"{option}: {reason}; correct it "
                                 f"(see {DOCS})")
            return None
        if parse is None or value is None:
            return value
        try:
            return parse(value)
        except ValueError as exc:
            self.problems.append(f"{option} = {value!r}: {exc}")
            return None

    def add(self, problem: str) -> None:
        """Record a problem found outside :meth:`get`."""
        self.problems.append(problem)

    def check(self) -> None:
        """Raise :class:`ConfigError` if any problem was recorded."""
        if self.problems:
            raise ConfigError(self.problems, sources(self.conf))


def value_reason(exc: Exception) -> str:
    """Why oslo.config refused a value: the type's complaint behind its
    error (which names the file as a repr), and for a number of more than
    4300 digits that, not Python's advice to raise the limit."""
    reason = exc.__context__ or exc
    long_number = long_number_reason(reason)
    return str(reason) if long_number is None else \
        f"{long_number} is not a value"


def _source_value_errors() -> tuple[type[Exception], ...]:
    # oslo.config's bad-value error; only oslo raises it, so without oslo
    # imported (the default configuration, virtdriver.conf.defaults)
    # there is nothing to catch.
    oslo = sys.modules.get("oslo_config.cfg")
    return (oslo.ConfigSourceValueError,) if oslo is not None else ()


def sources(conf: cfg.ConfigOpts) -> tuple[str, ...]:
    """The configuration files ``conf`` was read from, in order."""
    return tuple(conf.config_file or ())
