"""The one exception type raised for unusable capability XML."""

from __future__ import annotations


class CapabilityXMLError(ValueError):
    """Capability XML could not be turned into a model.

    Raised for malformed XML, hostile constructs (a DTD, entity
    declarations, external references), documents over the size limit, an
    unexpected root element, and values that do not fit their element (for
    example ``<memory>lots</memory>``).

    Attributes:
        source: where the XML came from (a file path, a libvirt URI and call,
            or ``"<string>"``).
        line: 1-based line of the offending element, or ``None`` when the
            problem is not tied to a line (e.g. the size limit).
        reason: what was wrong, in words.
        hint: what to do about it.
    """

    def __init__(self, source: str, reason: str, line: int | None = None,
                 hint: str | None = None) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        self.hint = hint or ("check that the document is libvirt capability "
                             "XML as produced by libvirt itself")
        where = f"{source}, line {line}" if line else source
        super().__init__(f"{where}: {reason} ({self.hint})")
