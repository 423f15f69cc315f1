"""Parse untrusted capability XML safely, and read typed values from it.

Capability documents come from libvirt, from snapshot directories that may
have passed through other hands, and from test fixtures.  They are parsed
with no DTD, no entity expansion, no file or network access and a size
limit; anything else is refused with :class:`CapabilityXMLError`.
"""

from __future__ import annotations

import threading

from lxml import etree

from virtdriver.capabilities.errors import CapabilityXMLError

#: Default upper bound on the size of one capability document, in bytes.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024

_DTD_MARKERS = (b"<!DOCTYPE", b"<!ENTITY")
_parsers = threading.local()

#: Integers in libvirt XML are at most 64-bit; longer digit strings are refused
#: before int() (which would refuse over 4300 digits with a ValueError).
MAX_DIGITS = 20

# Bytes per unit, for the units libvirt accepts on memory-like elements;
# exact integer arithmetic, so huge values neither overflow nor round.
_UNIT_BYTES = {
    "b": 1, "bytes": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024 ** 2, "mib": 1024 ** 2, "mb": 1000 ** 2,
    "g": 1024 ** 3, "gib": 1024 ** 3, "gb": 1000 ** 3,
    "t": 1024 ** 4, "tib": 1024 ** 4, "tb": 1000 ** 4,
}


def _parser() -> etree.XMLParser:
    # lxml parsers must not be shared between threads.
    parser = getattr(_parsers, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False,
            dtd_validation=False, huge_tree=False, remove_comments=True,
            remove_pis=True, remove_blank_text=True, collect_ids=False)
        _parsers.parser = parser
    return parser


def parse_document(xml: str | bytes, *, source: str, root_tag: str,
                   max_bytes: int = DEFAULT_MAX_BYTES) -> etree._Element:
    """Parse ``xml`` and return its root element, refusing anything unsafe.

    Args:
        xml: the document, as libvirt returns it (``str``) or as read from a
            file (``bytes``).
        source: where it came from; named in every error.
        root_tag: the root element the caller expects.
        max_bytes: documents larger than this are refused unparsed.

    Raises:
        CapabilityXMLError: the document is too large, malformed, contains
            a DTD or entity declarations, or has another root element.
    """
    data = xml if type(xml) is bytes else _as_bytes(xml, source)
    if len(data) > max_bytes:
        check_size(len(data), source=source, max_bytes=max_bytes,
                   hint="raise the size limit only if the source is trusted")
    # b"!" is one memchr; b"<!" alone would cost a tenth of the parse of a
    # large document ("<" is everywhere).  libvirt never writes "!" at all.
    if b"!" in data and b"<!" in data:
        for marker in _DTD_MARKERS:
            at = data.find(marker)
            if at >= 0:
                raise _dtd_error(source, data.count(b"\n", 0, at) + 1)
    parser = getattr(_parsers, "parser", None) or _parser()
    try:
        # The feed interface costs about 1 µs less per document than
        # fromstring() (a sixth of a small document's parse).
        parser.feed(data)
        root = parser.close()
    except Exception:
        # fromstring() below gives the error, more precise for some
        # inputs (an undefined entity reads "no element found" when fed).
        root = None
    except BaseException:
        _parsers.parser = None  # a fresh parser for the next document
        raise
    if root is None:
        _parsers.parser = None
        if not data or data.isspace():  # isspace(): no copy, unlike strip()
            raise CapabilityXMLError(source, "document is empty")
        root = _parse_or_raise(data, source)
    # "<" and an ASCII letter (libvirt's output: no BOM, no XML declaration)
    # matches none of libxml2's encoding signatures, so the document was
    # read as UTF-8, where a DTD is the bytes the scan above looks for.
    # Anything else (a BOM, UTF-16's "<\0", a declaration that may name
    # another encoding) is checked on the tree (0.2 µs).
    if (data[:1] != b"<" or not data[1:2].isalpha()) and \
            root.getroottree().docinfo.internalDTD is not None:
        raise _dtd_error(source, None)
    if root.tag != root_tag:
        raise CapabilityXMLError(
            source, f"root element is <{root.tag}>, expected <{root_tag}>",
            line=root.sourceline,
            hint=f"pass a <{root_tag}> document to this parser")
    return root


def _parse_or_raise(data: bytes, source: str) -> etree._Element:
    try:
        return etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise CapabilityXMLError(
            source, f"malformed XML: {exc.msg}", line=exc.lineno or None,
            hint="the document is not well-formed XML; re-read it from "
                 "libvirt or repair the file") from None
    except ValueError as exc:  # e.g. an unsupported encoding declaration
        raise CapabilityXMLError(source, f"unreadable XML: {exc}") from None


def check_size(size: int, *, source: str, max_bytes: int = DEFAULT_MAX_BYTES,
               hint: str | None = None) -> None:
    """Refuse a document of ``size`` bytes if it is over ``max_bytes``.

    :func:`parse_document` applies it to what it is given; code reading a
    document from a file applies it to the file's size *before* reading,
    so an oversized file costs a ``stat``, not its size in memory.

    Raises:
        CapabilityXMLError: over the limit; the message gives both sizes
            and ``hint`` (what to do).
    """
    if size > max_bytes:
        raise CapabilityXMLError(
            source, f"document is {_bytes(size)}, over the limit of "
            f"{_bytes(max_bytes)}", hint=hint)


def _bytes(count: int) -> str:
    """``1000 bytes``; from 1 MiB on also in MiB or GiB: ``… (16 MiB)``."""
    for unit, factor in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2)):
        if count >= factor:
            return f"{count} bytes ({count / factor:.4g} {unit})"
    return f"{count} bytes"


def _as_bytes(xml: str | bytes, source: str) -> bytes:
    if not isinstance(xml, str):
        return bytes(xml)
    head = xml[:100].lower()
    if head.startswith("<?xml") and "encoding" in head.split("?>")[0] \
            and not any(name in head for name in ("utf-8", "utf8", "ascii")):
        raise CapabilityXMLError(
            source, "a str document declares a non-UTF-8 encoding",
            line=1, hint="pass the raw bytes instead of decoded text")
    try:
        return xml.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CapabilityXMLError(
            source, f"text holds a character that is not valid Unicode "
            f"({exc.reason} at offset {exc.start})",
            hint="decode the source strictly, or pass its bytes") from None


def _dtd_error(source: str, line: int | None) -> CapabilityXMLError:
    return CapabilityXMLError(
        source, "document declares a DTD or entities, which capability XML "
        "never does; refused to guard against entity expansion and external "
        "references", line=line,
        hint="use the XML libvirt produced, unedited")


class ValueReader:
    """Typed access to attributes and text, with errors naming the source.

    Missing values give ``None`` (the caller decides the default); values
    that are present but do not fit raise :class:`CapabilityXMLError`.
    """

    __slots__ = ("source",)

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, el: etree._Element, reason: str) -> CapabilityXMLError:
        """Build the error for a bad value at ``el``."""
        return CapabilityXMLError(self.source, f"<{el.tag}>: {reason}",
                                  line=el.sourceline)

    def int_attr(self, el: etree._Element, name: str) -> int | None:
        """Attribute ``name`` of ``el`` as a non-negative integer."""
        value = el.get(name)
        if value is None:
            return None
        if value.isdigit() and value.isascii() and len(value) <= MAX_DIGITS:
            return int(value)
        return self._to_int(el, value, f"attribute {name}")

    def required_int(self, el: etree._Element, name: str) -> int:
        """Attribute ``name`` of ``el``, which must be present."""
        value = self.int_attr(el, name)
        if value is None:
            raise self.error(el, f"required attribute {name} is missing")
        return value

    def int_text(self, el: etree._Element | None) -> int | None:
        """Text of ``el`` as a non-negative integer (``None`` if no element)."""
        if el is None:
            return None
        return self._to_int(el, el.text or "", "text")

    def text(self, el: etree._Element | None) -> str | None:
        """Stripped text of ``el``; ``None`` when ``el`` is missing."""
        if el is None:
            return None
        return (el.text or "").strip()

    def kib(self, el: etree._Element, value: int, unit_attr: str = "unit",
            default_unit: str = "KiB") -> int:
        """Convert ``value`` in the unit named by ``el``'s attribute to KiB."""
        unit = el.get(unit_attr, default_unit)
        factor = _UNIT_BYTES.get(unit.lower())
        if factor is None:
            raise self.error(el, f"unknown unit {unit!r}")
        return value * factor // 1024

    def _to_int(self, el: etree._Element, value: str, what: str) -> int:
        text = value.strip()
        if not text.isdigit() or not text.isascii():
            raise self.error(el, f"{what} {_clip(value)} is not a "
                                 "non-negative integer")
        if len(text) > MAX_DIGITS:
            raise self.error(el, f"{what} {_clip(value)} is larger than any "
                                 "64-bit value libvirt writes")
        return int(text)


def _clip(value: str, limit: int = 40) -> str:
    """``repr`` of ``value``, shortened so an error message stays readable."""
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + f"… ({len(value)} characters)"


_KEYS = etree._Element.keys
_VALUES = etree._Element.values
def attribute_columns(els: list[etree._Element]
                      ) -> dict[str, tuple[str, ...]] | None:
    """The attributes of ``els`` as columns: name to every element's value.

    Only when every element has the same attributes in the same order (as
    libvirt writes a list), else ``None`` and the caller reads element by
    element.  ``keys()``/``values()`` are mapped over the list in C, with
    no Python bytecode per element (a 32-CPU cell read by column costs
    about 28% less than CPU by CPU).  The values are unchecked strings.
    """
    keys = list(map(_KEYS, els))
    if not keys or keys.count(keys[0]) != len(keys):
        return None
    return dict(zip(keys[0], zip(*map(_VALUES, els), strict=True),
                    strict=True))


def digit_column(values: tuple[str, ...], max_digits: int = MAX_DIGITS
                 ) -> bool:
    """Whether every one of ``values`` is 1 to ``max_digits`` ASCII digits.

    Checked on the whole column at once (``join``, ``isdigit``, ``max``
    run in C); a column that fails is read value by value, for the error.
    """
    joined = "".join(values)
    return (joined.isdigit() and joined.isascii() and "" not in values
            and max(map(len, values)) <= max_digits)


#: libvirt's exact spellings (the fast path of :func:`yes_no`); read only.
YES_NO = {"yes": True, "on": True, "no": False, "off": False}


def yes_no(value: str | None) -> bool | None:
    """Map libvirt's ``yes``/``no`` (also ``on``/``off``) to a tri-state.

    Anything else (``unknown``, absent) gives ``None``.
    """
    if value is None:
        return None
    found = YES_NO.get(value)
    if found is None:
        found = YES_NO.get(value.strip().lower())
    return found
