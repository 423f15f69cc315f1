"""Small lxml helpers the builders share: elements in, libvirt-shaped text out.

lxml does the escaping; these only keep the builders short and make every
document come out indented the way libvirt indents (two spaces).
"""

from __future__ import annotations

from lxml import etree


def sub(parent: etree._Element, tag: str, text: object = None,
        **attrs: object) -> etree._Element:
    """Append ``<tag attrs...>text</tag>`` to ``parent``.

    Attributes whose value is ``None`` are left out; the others are written
    in the order given, as libvirt writes them.
    """
    el = etree.SubElement(parent, tag, {
        name: str(value) for name, value in attrs.items() if value is not None})
    if text is not None:
        el.text = str(text)
    return el


def yes_no(flag: bool) -> str:
    """libvirt's ``virYesNo`` spelling of a flag."""
    return "yes" if flag else "no"


def to_xml(root: etree._Element) -> str:
    """Serialise ``root`` indented by two spaces, newline-terminated."""
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="unicode") + "\n"
