"""libvirt CPU feature names ↔ os-traits ``HW_CPU_*`` names.

Which libvirt feature gives which trait, per arch: the x86 aliases where
libvirt's spelling differs from the trait suffix, the trait sets of the
CPU feature family, their inverse (trait → the features that give it), and
the POWER model pattern.  Derivation lives in :mod:`.cpu_features`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import os_traits

X86_PREFIX = "HW_CPU_X86_"
AARCH64_PREFIX = "HW_CPU_AARCH64_"
PPC64LE_PREFIX = "HW_CPU_PPC64LE_"
#: Host arches the x86 traits describe.
X86_ARCHES = frozenset({"x86_64", "i686"})

#: Derived by other families (memory encryption).
_ELSEWHERE = frozenset({
    os_traits.HW_CPU_X86_AMD_SEV, os_traits.HW_CPU_X86_AMD_SEV_ES,
    os_traits.HW_CPU_X86_AMD_SEV_SNP, os_traits.HW_CPU_X86_INTEL_TDX})

X86_TRAITS = frozenset(os_traits.get_traits(X86_PREFIX)) - _ELSEWHERE
AARCH64_TRAITS = frozenset(os_traits.get_traits(AARCH64_PREFIX))
PPC64LE_TRAITS = frozenset(os_traits.get_traits(PPC64LE_PREFIX))

#: libvirt's spelling of features whose trait suffix differs (or that map to
#: two traits).  A trait listed here is reached only through this table.
X86_ALIASES: Mapping[str, tuple[str, ...]] = {
    "pclmuldq": (os_traits.HW_CPU_X86_CLMUL,),
    "pni": (os_traits.HW_CPU_X86_SSE3,),
    "sse4.1": (os_traits.HW_CPU_X86_SSE41,),
    "sse4.2": (os_traits.HW_CPU_X86_SSE42,),
    "aes": (os_traits.HW_CPU_X86_AESNI,),
    "fma": (os_traits.HW_CPU_X86_FMA3,),
    "sha-ni": (os_traits.HW_CPU_X86_SHA,),
    "bmi1": (os_traits.HW_CPU_X86_BMI,),
    "svm": (os_traits.HW_CPU_X86_SVM, os_traits.HW_CPU_X86_AMD_SVM),
    "vmx": (os_traits.HW_CPU_X86_VMX, os_traits.HW_CPU_X86_INTEL_VMX),
    "avx512-vpopcntdq": (os_traits.HW_CPU_X86_AVX512VPOPCNTDQ,),
    "vaes": (os_traits.HW_CPU_X86_AVX512VAES,),
    "gfni": (os_traits.HW_CPU_X86_AVX512GFNI,),
    "vpclmulqdq": (os_traits.HW_CPU_X86_AVX512VPCLMULQDQ,),
    "hle": (os_traits.HW_CPU_X86_TSX,),
    "rtm": (os_traits.HW_CPU_X86_TSX,),
    "amx-bf16": (os_traits.HW_CPU_X86_AMXBF16,),
    "amx-int8": (os_traits.HW_CPU_X86_AMXINT8,),
    "amx-tile": (os_traits.HW_CPU_X86_AMXTILE,),
    "ibpb": (os_traits.HW_CPU_X86_AMD_IBPB,),
    "amd-no-ssb": (os_traits.HW_CPU_X86_AMD_NO_SSB,),
    "amd-ssbd": (os_traits.HW_CPU_X86_AMD_SSBD,),
    "virt-ssbd": (os_traits.HW_CPU_X86_AMD_VIRT_SSBD,),
    "md-clear": (os_traits.HW_CPU_X86_INTEL_MD_CLEAR,),
    "pcid": (os_traits.HW_CPU_X86_INTEL_PCID,),
    "spec-ctrl": (os_traits.HW_CPU_X86_INTEL_SPEC_CTRL,),
    "ssbd": (os_traits.HW_CPU_X86_INTEL_SSBD,),
    "stibp": (os_traits.HW_CPU_X86_STIBP,),
    "amd-stibp": (os_traits.HW_CPU_X86_STIBP,),
}


def _feature_map(traits: Iterable[str], prefix: str,
                 aliases: Mapping[str, tuple[str, ...]]
                 ) -> dict[str, tuple[str, ...]]:
    """libvirt feature → traits: the aliases, then each other trait's
    lowercased suffix (``HW_CPU_X86_AVX2`` ← ``avx2``)."""
    aliased = {trait for found in aliases.values() for trait in found}
    mapping = dict(aliases)
    for trait in sorted(set(traits) - aliased):
        mapping[trait[len(prefix):].lower()] = (trait,)
    return mapping


#: libvirt x86 feature name → the traits it gives.
X86_FEATURE_TRAITS = _feature_map(X86_TRAITS, X86_PREFIX, X86_ALIASES)
#: libvirt (Linux hwcap) aarch64 feature name → the traits it gives.
AARCH64_FEATURE_TRAITS = _feature_map(AARCH64_TRAITS, AARCH64_PREFIX, {})


def _inverse(mapping: Mapping[str, tuple[str, ...]]
             ) -> dict[str, tuple[str, ...]]:
    """feature → traits turned into trait → the features giving it."""
    found: dict[str, list[str]] = {}
    for feature, traits in mapping.items():
        for trait in traits:
            found.setdefault(trait, []).append(feature)
    return {trait: tuple(sorted(names)) for trait, names in found.items()}


#: x86 trait → the libvirt features that give it.
X86_SOURCES = _inverse(X86_FEATURE_TRAITS)
#: aarch64 trait → the libvirt features that give it.
AARCH64_SOURCES = _inverse(AARCH64_FEATURE_TRAITS)
#: A POWER CPU model or trait suffix (``POWER9``), its generation grouped.
POWER_RE = re.compile(r"^power(\d+)", re.IGNORECASE)
