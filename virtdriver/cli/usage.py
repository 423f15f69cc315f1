"""How the ``virtdriver`` command reports a usage error.

argparse's own report is its usage block (several lines, none starting
``virtdriver:``) and then ``virtdriver COMMAND: error: ...``.  Ours is
the project's one shape for every error (docs/exit-codes.md): one
``virtdriver: <cause>`` line, then one ``virtdriver: <what to do>`` line,
exit 2.  A mistyped command, action, choice or option gets the closest
real one ("did you mean"), as argparse does itself only from Python 3.14.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

#: argparse exits 2 on a usage error; so does :meth:`Parser.error`.
EXIT_USAGE = 2
#: The program name every error line starts with.
PROG = "virtdriver"


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` most likely misspells, or ``None``."""
    found = difflib.get_close_matches(word, list(candidates), n=1)
    return found[0] if found else None


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are two ``virtdriver:`` lines
    and that suggests the closest command, choice or option.  Its
    subparsers are of this class too (argparse makes them of the
    parent's)."""

    def add_subparsers(self, **kwargs):
        """As argparse's; the action is kept as :attr:`commands` to find
        which parser an unrecognized option was meant for."""
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def parse_args(self, args: Sequence[str] | None = None,
                   namespace: argparse.Namespace | None = None
                   ) -> argparse.Namespace:
        """As argparse's, but an unrecognized argument is reported by the
        (sub)command it was given to, with the closest of its options."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self.chosen(parsed)
            message = f"unrecognized arguments: {' '.join(extras)}"
            flag = next((word.partition("=")[0] for word in extras
                         if word.startswith("-")), None)
            guess = flag and closest(flag, chosen.option_names())
            if guess:
                message += f"; did you mean {guess}?"
            chosen.error(message)
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> Parser:
        """The innermost (sub)parser ``parsed`` went through."""
        commands = getattr(self, "commands", None)
        name = commands and getattr(parsed, commands.dest, None)
        inner = commands.choices.get(name) if name else None
        return inner.chosen(parsed) if isinstance(inner, Parser) else self

    def option_names(self) -> list[str]:
        """Every option string this parser accepts."""
        return [option for action in self._actions
                for option in action.option_strings]

    def _check_value(self, action: argparse.Action, value) -> None:
        # argparse's check, with the closest choice instead of the list
        # when one is close (a typo'd command, action or --format).
        choices = action.choices
        if choices is None or value in choices:
            return
        guess = (closest(value, [c for c in choices if isinstance(c, str)])
                 if isinstance(value, str) else None)
        hint = (f"did you mean {guess!r}?" if guess else
                "choose from " + ", ".join(map(repr, choices)))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}; {hint}")

    def error(self, message: str) -> NoReturn:
        """Print the two lines (cause, what to do) and exit 2."""
        command = self.prog[len(PROG):].strip()
        where = f"{command}: " if command else ""
        todo = (f"run `{self.prog} --help` for its options" if command
                else f"run `{PROG} --help` for the commands")
        cause = " ".join(message.split())
        sys.stderr.write(f"{PROG}: {where}{cause}\n{PROG}: {todo}\n")
        sys.exit(EXIT_USAGE)
