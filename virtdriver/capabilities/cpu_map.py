"""Read libvirt's CPU map: which features each named CPU model includes.

libvirt describes its CPU models in a directory of XML files
(``/usr/share/libvirt/cpu_map``).  ``index.xml`` lists, per ``<arch
name=...>``, the files to ``<include filename=...>``: vendors, the arch's
feature list (``x86_features.xml``) and one file per model.  A model is

.. code-block:: xml

    <model name='Haswell-v1'>
      <model name='Haswell'/>              <!-- inherits Haswell's features -->
      <feature name='avx2'/>
      <feature name='monitor' removed='yes'/>
    </model>

:func:`parse_cpu_map` turns those documents into a frozen
:class:`CPUModelCatalog`.  Pure: the caller reads the files (see
``virtdriver.drivers.libvirt.cpu_map_loader``).  Elements this module does
not need (vendors, signatures, CPUID bits) are skipped.

Features marked ``removed='yes'`` were dropped from the model by QEMU;
libvirt keeps them in the definition for compatibility but guests do not
get them, so they are kept apart in :attr:`MapModel.removed` and are not in
:attr:`MapModel.features`.  The old single-document layout (models and
features directly inside ``<arch>``, libvirt < 4.7) is read the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lxml import etree

from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.xmlsafe import parse_document, yes_no

#: The document that lists every other one.
INDEX = "index.xml"
_ROOT = "cpus"


@dataclass(frozen=True, slots=True)
class MapModel:
    """One CPU model of the map, with inheritance already resolved.

    Attributes:
        name: the model name (``Haswell``, ``EPYC-Rome``, ``POWER9``).
        arch: the ``<arch name=...>`` it is listed under (``x86``,
            ``ppc64``, ``arm``).
        features: every feature guests of this model get, inherited ones
            included, removed ones excluded.
        removed: features marked ``removed='yes'`` (here or in an
            ancestor).
        ancestor: the model it inherits from, if any.
        source: the file that defines it.
    """

    name: str
    arch: str
    features: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    ancestor: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class CPUModelCatalog:
    """Every model of a CPU map, and every feature name each arch defines.

    Attributes:
        models: model name → :class:`MapModel`.
        arch_features: arch → feature names its feature list defines
            (arches without a feature list are absent).
        source: where the map was read from (a directory), when known.
    """

    models: Mapping[str, MapModel] = field(
        default_factory=lambda: MappingProxyType({}))
    arch_features: Mapping[str, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({}))
    source: str | None = None

    def __contains__(self, name: object) -> bool:
        return name in self.models

    def __len__(self) -> int:
        return len(self.models)

    def features_of(self, name: str) -> frozenset[str] | None:
        """Features of model ``name``, or ``None`` when it is not in the map."""
        model = self.models.get(name)
        return None if model is None else model.features

    def model_features(self) -> dict[str, frozenset[str]]:
        """Model name → features, as trait derivation reads them
        (``DerivationInputs.cpu_model_features``)."""
        return {name: model.features for name, model in self.models.items()}


@dataclass(slots=True)
class _Draft:
    """A model as written, before its ancestor is resolved."""

    name: str
    arch: str
    source: str
    line: int | None
    ancestor: str | None = None
    features: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def parse_cpu_map(documents: Mapping[str, bytes], *,
                  arch_prefix: str | None = None) -> CPUModelCatalog:
    """Parse libvirt's CPU map.

    Args:
        documents: file name (``index.xml``, ``x86_Haswell.xml``) → its
            bytes; must hold ``index.xml`` and every file it includes for
            the arches read.
        arch_prefix: read only ``<arch>`` elements whose name starts with
            this (``"x86"``); the others' files need not be present.

    Raises:
        CapabilityXMLError: a document is missing, malformed or hostile
            (see :func:`~.xmlsafe.parse_document`), a model is defined twice,
            inherits from a model that does not exist or from itself, or
            names a feature its arch's feature list does not define.
    """
    if INDEX not in documents:
        raise CapabilityXMLError(
            INDEX, "the CPU map has no index.xml",
            hint="pass the whole cpu_map directory, index.xml included")
    drafts: dict[str, _Draft] = {}
    arch_features: dict[str, set[str]] = {}
    index = _parse(documents, INDEX)
    for arch_el in index.iterchildren("arch"):
        arch = arch_el.get("name")
        if not arch:
            raise CapabilityXMLError(INDEX, "<arch> has no name attribute",
                                     line=arch_el.sourceline)
        if arch_prefix is not None and not arch.startswith(arch_prefix):
            continue
        for source, el in _arch_elements(documents, arch_el):
            if el.tag == "model":
                _add_draft(drafts, _read_model(el, arch, source))
            elif el.tag == "feature":
                arch_features.setdefault(arch, set()).add(
                    _name(el, source))
    frozen_features = {arch: frozenset(names)
                       for arch, names in arch_features.items()}
    models = _resolve(drafts, frozen_features)
    return CPUModelCatalog(MappingProxyType(models),
                           MappingProxyType(frozen_features))


def _parse(documents: Mapping[str, bytes], name: str) -> etree._Element:
    return parse_document(documents[name], source=name, root_tag=_ROOT)


def _arch_elements(documents: Mapping[str, bytes], arch_el: etree._Element
                   ) -> Iterator[tuple[str, etree._Element]]:
    """(file name, element) for the models and features of one arch."""
    for el in arch_el:
        if el.tag != "include":
            yield INDEX, el
            continue
        filename = el.get("filename") or ""
        if not filename or "/" in filename or filename.startswith("."):
            raise CapabilityXMLError(
                INDEX, f"<include filename={filename!r}> is not a plain "
                "file name in the cpu_map directory", line=el.sourceline)
        if filename not in documents:
            raise CapabilityXMLError(
                INDEX, f"includes {filename!r}, which is missing",
                line=el.sourceline,
                hint="pass every file of the cpu_map directory, or "
                     "restrict the arches read with arch_prefix")
        for child in _parse(documents, filename):
            yield filename, child


def _name(el: etree._Element, source: str) -> str:
    name = (el.get("name") or "").strip()
    if not name:
        raise CapabilityXMLError(source, f"<{el.tag}> has no name attribute",
                                 line=el.sourceline)
    return name


def _read_model(el: etree._Element, arch: str, source: str) -> _Draft:
    draft = _Draft(_name(el, source), arch, source, el.sourceline)
    for child in el:
        if child.tag == "model":
            if draft.ancestor is not None:
                raise CapabilityXMLError(
                    source, f"model {draft.name!r} names two ancestors",
                    line=child.sourceline)
            draft.ancestor = _name(child, source)
        elif child.tag == "feature":
            target = (draft.removed if yes_no(child.get("removed"))
                      else draft.features)
            target.append(_name(child, source))
    return draft


def _add_draft(drafts: dict[str, _Draft], draft: _Draft) -> None:
    earlier = drafts.setdefault(draft.name, draft)
    if earlier is not draft:
        raise CapabilityXMLError(
            draft.source, f"CPU model {draft.name!r} is defined again "
            f"(first in {earlier.source})", line=draft.line)


def _resolve(drafts: Mapping[str, _Draft],
             arch_features: Mapping[str, frozenset[str]]
             ) -> dict[str, MapModel]:
    """Resolve every draft's ancestors, checking names on the way."""
    done: dict[str, MapModel] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> MapModel:
        if name in done:
            return done[name]
        draft = drafts[name]
        if name in chain:
            raise CapabilityXMLError(
                draft.source, "CPU model inheritance loops: "
                + " → ".join(chain + (name,)), line=draft.line)
        features, removed = set(draft.features), set(draft.removed)
        if draft.ancestor is not None:
            base = drafts.get(draft.ancestor)
            if base is None or base.arch != draft.arch:
                raise CapabilityXMLError(
                    draft.source, f"CPU model {name!r} inherits from "
                    f"{draft.ancestor!r}, which is not a {draft.arch} model "
                    "of the map", line=draft.line)
            parent = resolve(draft.ancestor, chain + (name,))
            features |= parent.features
            removed |= parent.removed
        _check_features(draft, features | removed, arch_features)
        removed -= set(draft.features)
        done[name] = MapModel(name, draft.arch,
                              frozenset(features - removed),
                              frozenset(removed), draft.ancestor,
                              draft.source)
        return done[name]

    for name in drafts:
        resolve(name, ())
    return done


def _check_features(draft: _Draft, names: set[str],
                    arch_features: Mapping[str, frozenset[str]]) -> None:
    known = arch_features.get(draft.arch)
    if known is None:  # the arch has no feature list (ppc64)
        return
    unknown = sorted(names - known)
    if unknown:
        raise CapabilityXMLError(
            draft.source, f"CPU model {draft.name!r} names features "
            f"{', '.join(map(repr, unknown))} that the {draft.arch} feature "
            "list does not define", line=draft.line)
