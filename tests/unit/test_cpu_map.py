"""libvirt's CPU map: the real installed map, inheritance, and bad input."""

import os
import pathlib

import pytest

from virtdriver.capabilities.cpu_map import parse_cpu_map
from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.drivers.libvirt.cpu_map_loader import (
    DEFAULT_CPU_MAP_DIR, load_cpu_map)

REAL_MAP = pathlib.Path(DEFAULT_CPU_MAP_DIR)

FEATURES = b"""<cpus>
  <feature name='sse2'><cpuid eax_in='0x01' edx='0x04000000'/></feature>
  <feature name='avx'><cpuid eax_in='0x01' ecx='0x10000000'/></feature>
  <feature name='avx2'><cpuid eax_in='0x07' ecx_in='0x00' ebx='0x20'/></feature>
  <feature name='monitor'><cpuid eax_in='0x01' ecx='0x00000008'/></feature>
</cpus>"""


def index(*files: str, arch: str = "x86") -> bytes:
    """An index.xml including ``files`` under one arch."""
    includes = "".join(f"<include filename='{name}'/>" for name in files)
    return f"<cpus><arch name='{arch}'>{includes}</arch></cpus>".encode()


def model(name: str, body: str = "") -> bytes:
    """A one-model file."""
    return f"<cpus><model name='{name}'>{body}</model></cpus>".encode()


def chain_map() -> dict[str, bytes]:
    """Base ← Mid ← Top, with a removed feature in Base."""
    return {
        "index.xml": index("x86_features.xml", "x86_Top.xml",
                           "x86_Mid.xml", "x86_Base.xml"),
        "x86_features.xml": FEATURES,
        "x86_Base.xml": model("Base", "<feature name='sse2'/>"
                                      "<feature name='monitor' removed='yes'/>"),
        "x86_Mid.xml": model("Mid", "<model name='Base'/>"
                                    "<feature name='avx'/>"),
        "x86_Top.xml": model("Top", "<model name='Mid'/>"
                                    "<feature name='avx2'/>"),
    }


@pytest.fixture(scope="module")
def real_map_dir() -> pathlib.Path:
    """libvirt's installed CPU map; CI must have it, elsewhere it may lack."""
    if not (REAL_MAP / "index.xml").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"libvirt's CPU map is missing at {REAL_MAP}; CI "
                        "installs libvirt0, which ships it")
        pytest.skip(f"libvirt's CPU map is not installed at {REAL_MAP}")
    return REAL_MAP


def real_documents(directory: pathlib.Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.glob("*.xml")}


# -- the real map -----------------------------------------------------------

def test_real_map_has_x86_models_with_their_features(real_map_dir):
    catalog = load_cpu_map(real_map_dir)
    haswell = catalog.models["Haswell"]
    assert haswell.arch == "x86"
    assert {"avx2", "fma", "pclmuldq", "sse4.2", "hle", "rtm"} \
        <= haswell.features
    assert "avx512f" not in haswell.features
    assert "sha-ni" in catalog.features_of("EPYC-Rome")
    assert catalog.source == str(real_map_dir)


def test_real_map_model_features_are_defined_by_the_arch(real_map_dir):
    catalog = load_cpu_map(real_map_dir)
    x86 = [m for m in catalog.models.values() if m.arch == "x86"]
    assert len(x86) > 40
    for found in x86:
        assert found.features <= catalog.arch_features["x86"], found.name


def test_real_map_keeps_removed_features_out_of_the_model(real_map_dir):
    catalog = load_cpu_map(real_map_dir)
    removed = {m.name: m.removed for m in catalog.models.values()
               if m.removed}
    assert removed, "expected libvirt's map to mark some feature removed"
    for name, features in removed.items():
        assert not features & catalog.models[name].features, name


def test_real_map_reads_power_models_without_features(real_map_dir):
    catalog = load_cpu_map(real_map_dir)
    assert catalog.models["POWER9"].arch == "ppc64"
    assert catalog.models["POWER9"].features == frozenset()


def test_real_map_versioned_model_inherits_in_libvirts_own_format(
        real_map_dir):
    """libvirt >= 10 writes ``Haswell-v1`` as ``<model name='Haswell'/>``;
    added to the installed files, it resolves to Haswell's features."""
    documents = real_documents(real_map_dir)
    documents["index.xml"] = documents["index.xml"].replace(
        b"<include filename='x86_Haswell.xml'/>",
        b"<include filename='x86_Haswell.xml'/>"
        b"<include filename='x86_Haswell-v1.xml'/>")
    documents["x86_Haswell-v1.xml"] = (
        b"<cpus>\n  <model name='Haswell-v1'>\n"
        b"    <decode host='on' guest='off'/>\n"
        b"    <model name='Haswell'/>\n  </model>\n</cpus>\n")
    catalog = parse_cpu_map(documents)
    assert catalog.models["Haswell-v1"].ancestor == "Haswell"
    assert catalog.features_of("Haswell-v1") == catalog.features_of("Haswell")
    assert "avx2" in catalog.features_of("Haswell-v1")


def test_real_map_arch_prefix_needs_only_that_arch(real_map_dir):
    documents = {name: data for name, data in
                 real_documents(real_map_dir).items()
                 if name == "index.xml" or name.startswith("x86_")}
    catalog = parse_cpu_map(documents, arch_prefix="x86")
    assert "Haswell" in catalog
    assert "POWER9" not in catalog
    with pytest.raises(CapabilityXMLError, match="ppc64_vendors.xml"):
        parse_cpu_map(documents)


# -- inheritance ------------------------------------------------------------

def test_inheritance_resolves_through_every_ancestor():
    catalog = parse_cpu_map(chain_map())
    assert catalog.features_of("Top") == {"sse2", "avx", "avx2"}
    assert catalog.features_of("Mid") == {"sse2", "avx"}
    assert catalog.models["Top"].removed == {"monitor"}
    assert catalog.model_features()["Base"] == {"sse2"}


def test_a_feature_listed_again_undoes_an_inherited_removal():
    documents = chain_map()
    documents["x86_Mid.xml"] = model(
        "Mid", "<model name='Base'/><feature name='monitor'/>")
    catalog = parse_cpu_map(documents)
    assert "monitor" in catalog.features_of("Mid")
    assert "monitor" in catalog.features_of("Top")


def test_unknown_model_has_no_features():
    assert parse_cpu_map(chain_map()).features_of("Nope") is None


def test_old_single_file_layout_reads_models_inside_arch():
    documents = {"index.xml": b"<cpus><arch name='x86'>"
                 b"<feature name='avx'/><model name='Old'>"
                 b"<feature name='avx'/></model></arch></cpus>"}
    assert parse_cpu_map(documents).features_of("Old") == {"avx"}


# -- bad input --------------------------------------------------------------

def test_hostile_included_document_is_refused_naming_the_file():
    documents = chain_map()
    documents["x86_Mid.xml"] = (
        b"<?xml version='1.0'?><!DOCTYPE cpus [<!ENTITY x SYSTEM "
        b"'file:///etc/passwd'>]><cpus><model name='&x;'/></cpus>")
    with pytest.raises(CapabilityXMLError) as info:
        parse_cpu_map(documents)
    assert info.value.source == "x86_Mid.xml"
    assert "DTD" in info.value.reason


def test_malformed_index_is_refused():
    with pytest.raises(CapabilityXMLError, match="index.xml.*malformed"):
        parse_cpu_map({"index.xml": b"<cpus><arch name='x86'>"})


@pytest.mark.parametrize(("change", "message"), [
    ({"x86_Base.xml": None}, "includes 'x86_Base.xml', which is missing"),
    ({"x86_Mid.xml": model("Mid", "<model name='Gone'/>")},
     "inherits from 'Gone', which is not a x86 model"),
    ({"x86_Base.xml": model("Base", "<model name='Top'/>")},
     "inheritance loops"),
    ({"x86_Mid.xml": model("Top")}, "'Top' is defined again"),
    ({"x86_Top.xml": model("Top", "<feature name='warp-drive'/>")},
     "'warp-drive' that the x86 feature list does not define"),
    ({"x86_Top.xml": model("Top", "<model name='Mid'/><model name='Base'/>")},
     "names two ancestors"),
    ({"x86_Top.xml": b"<cpus><model/></cpus>"}, "<model> has no name"),
    ({"index.xml": b"<cpus><arch name='x86'><include filename='../x'/>"
                   b"</arch></cpus>"}, "not a plain file name"),
    ({"index.xml": None}, "no index.xml"),
    ({"x86_Top.xml": b"<domain/>"}, "root element is <domain>"),
])
def test_invalid_maps_are_refused_precisely(change, message):
    documents = chain_map()
    for name, data in change.items():
        if data is None:
            del documents[name]
        else:
            documents[name] = data
    with pytest.raises(CapabilityXMLError, match=message):
        parse_cpu_map(documents)


# -- the loader -------------------------------------------------------------

def test_missing_directory_gives_an_empty_catalog(tmp_path):
    catalog = load_cpu_map(tmp_path / "absent")
    assert len(catalog) == 0
    assert catalog.features_of("Haswell") is None


def test_loader_reads_a_directory_and_names_bad_files_by_path(tmp_path):
    for name, data in chain_map().items():
        (tmp_path / name).write_bytes(data)
    assert load_cpu_map(tmp_path).features_of("Top") == {"sse2", "avx",
                                                         "avx2"}
    (tmp_path / "x86_Mid.xml").write_bytes(b"<cpus><model")
    with pytest.raises(CapabilityXMLError) as info:
        load_cpu_map(tmp_path)
    assert info.value.source == str(tmp_path / "x86_Mid.xml")
