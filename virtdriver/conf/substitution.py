"""``$`` in a config value: oslo.config substitutes another option there.

``state_dir = $state_path/vd`` reads ``[DEFAULT] state_path`` (or
``${group.option}``); ``$$`` (or ``\\$``) is a literal ``$``.  A ``$``
that names no option — a password ``pa$word``, a path ``/tmp/$x`` — made
oslo.config raise ``NoSuchOptError`` from wherever the value was first
read, which the command reported as a bug (or as its driver's).
:func:`substitution_problems` reads every registered option once, right
after the files are read, and turns each such failure into one line
naming the option and the fix.
"""

from __future__ import annotations

from oslo_config import cfg

from virtdriver.conf.reader import DOCS


#: What oslo.config raises for a ``$`` it cannot substitute (``$x.log``
#: names option ``log`` of a group ``x``).
SUBSTITUTION_ERRORS = (cfg.NoSuchOptError, cfg.NoSuchGroupError,
                       cfg.TemplateSubstitutionError)


def substitution_reason(exc: Exception, value: str = "its value") -> str:
    """Why a value with ``$`` failed (one of :data:`SUBSTITUTION_ERRORS`),
    and the fix."""
    option = getattr(exc, "opt_name", None)
    group = getattr(exc, "group_name", None)
    what = (f"${option}, and there is no option {option!r}" if option
            else f"${group}..., and there is no group {group!r}" if group
            else f"what it cannot ({exc})")
    return (f"a '$' in {value} substitutes {what}; write $$ for a "
            f"literal '$' (see {DOCS})")


def failed_substitution(exc: BaseException) -> BaseException | None:
    """The error of oslo.config failing to substitute a ``$`` that is
    ``exc`` or led to it (oslo re-raises it as "no such option" of the
    option being read), or ``None``: code reading an option that does not
    exist is a bug, not a value's fault."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, SUBSTITUTION_ERRORS) and _in_substitution(exc):
            return exc
        exc = exc.__cause__ or (None if exc.__suppress_context__
                                else exc.__context__)
    return None


def _in_substitution(exc: BaseException) -> bool:
    frame = exc.__traceback__
    while frame is not None:
        if (frame.tb_frame.f_code.co_name == "_substitute"
                and frame.tb_frame.f_globals.get("__name__")
                == "oslo_config.cfg"):
            return True
        frame = frame.tb_next
    return False


def raw_culprits(paths: list[str], exc: Exception) -> list[str]:
    """``[section] option`` of each value in ``paths`` that holds the
    ``$name`` ``exc`` could not substitute (oslo.config's error does not
    say which option it was reading)."""
    name = getattr(exc, "opt_name", None) or getattr(exc, "group_name", "")
    found = []
    for path in paths:
        sections: dict[str, dict[str, list[str]]] = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except Exception:  # noqa: BLE001,S112 (read once already)
            continue
        for section, options in sections.items():
            for option, values in options.items():
                if any(f"${name}" in value or f"${{{name}" in value
                       for value in values):
                    found.append(f"[{section}] {option}")
    return found


def substitution_problems(conf: cfg.ConfigOpts) -> list[str]:
    """One line per option whose value substitutes an option that does
    not exist (or a whole group).  Values of the wrong type are left to
    the code that reads them, which says what it expects."""
    problems: list[str] = []
    for name in list(conf):
        value = _read(conf, None, name, problems)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for option in list(value):
                _read(value, name, option, problems)
    return problems


def _read(section, group: str | None, name: str, problems: list[str]):
    """``section[name]``, or ``None`` after recording why not."""
    try:
        return section[name]
    except SUBSTITUTION_ERRORS as exc:
        problems.append(f"[{group or 'DEFAULT'}] {name}: "
                        f"{substitution_reason(exc)}")
    except Exception:  # noqa: BLE001,S110 (reported where it is read)
        pass
    return None
