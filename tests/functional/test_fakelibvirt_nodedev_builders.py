"""fakelibvirt's node device builders and loader.

* Builders: ``computer``, VPD, vDPA, CSS and AP devices are libvirt's own
  test documents (same elements, order and text; only the quote style
  differs) and validate against libvirt 9.0's ``nodedev.rng``.
* Loader: every corpus file loads (the three ``-invalid`` ones are
  refused, as libvirt's parser refuses them), several documents per file,
  duplicates and foreign files refused with the file named.
* SR-IOV: a VF and PF that contradict each other are refused.
"""

from __future__ import annotations

import pathlib

import pytest
from lxml import etree

from tests.corpus import CORPUS
from virtdriver import fakelibvirt
from virtdriver.fakelibvirt.builders import (
    VPD, MdevType, NodeDeviceLoadError, ap_card_device, ap_matrix_device,
    ap_queue_device, computer_device, css_device, host_documents,
    load_node_devices, pci_device, vdpa_device)

NODEDEV = CORPUS / "nodedev"
SCHEMA = pathlib.Path("/usr/share/libvirt/schemas/nodedev.rng")


def _canonical(xml: str) -> bytes:
    return etree.tostring(etree.fromstring(xml.encode()), method="c14n")


def _corpus(name: str) -> str:
    return (NODEDEV / name).read_text()


CCW_IO = MdevType("vfio_ccw-io", "I/O subchannel (Non-QDIO)", 1, "vfio-ccw")
AS_IN_CORPUS = {
    "computer.xml": lambda: computer_device(
        "12345678-1234-1234-9596-a088b277d677", vendor="LENOVO",
        version="ThinkPad T60p", serial="123123", firmware_vendor="LENOVO",
        firmware_version="79ETE1WW (2.21 )", release_date="02/05/2008"),
    "css_0_0_fffe_mdev_types.xml": lambda: css_device(
        0, 0, 0xfffe, mdev_types=(CCW_IO,)),
    "css_0_0_ffff_channel_dev_addr.xml": lambda: css_device(
        0, 0, 0xffff, channel_devno=0x815),
    "ap_matrix_mdev_types.xml": ap_matrix_device,
    "ap_card07.xml": lambda: ap_card_device(7),
    "ap_07_0038.xml": lambda: ap_queue_device(7, 0x38),
}


@pytest.mark.parametrize("corpus_file", sorted(AS_IN_CORPUS))
def test_builders_write_libvirts_documents(corpus_file):
    built = AS_IN_CORPUS[corpus_file]()
    assert _canonical(built.xml) == _canonical(_corpus(corpus_file))


def test_vpd_as_in_corpus():
    corpus = etree.fromstring(_corpus("pci_0000_42_00_0_vpd.xml").encode())
    want = corpus.find("capability/capability[@type='vpd']")
    built = pci_device("0000:42:00.0", 0x15b3, 0xa2d6, vpd=VPD(
        want.findtext("name"), serial_number="MT2113X00000",
        part_number="MBF2H332A-AEEOT", change_level="B1",
        manufacture_id="foobar", vendor_fields={
            "0": "PCIeGen4 x8", "2": "MBF2H332A-AEEOT",
            "3": "3c53d07eec484d8aab34dabd24fe575aa",
            "A": "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=BF2H332A"},
        asset_tag="fooasset"))
    got = etree.fromstring(built.xml.encode()).find(
        "capability/capability[@type='vpd']")
    # the corpus's read-write fields carry more than asset_tag; compare
    # the name and every read-only field
    assert etree.tostring(got.find("name"), method="c14n") == \
        etree.tostring(want.find("name"), method="c14n")
    assert _canonical(etree.tostring(got.find("fields[@access='readonly']"),
                                     encoding="unicode")) == \
        _canonical(etree.tostring(want.find("fields[@access='readonly']"),
                                  encoding="unicode"))
    assert built.capabilities == ("pci", "vpd")


def test_computer_uuid_is_stable_per_hostname():
    assert computer_device(hostname="a").xml == computer_device(
        hostname="a").xml
    assert computer_device(hostname="a").xml != computer_device(
        hostname="b").xml


def test_host_documents_have_a_computer_root():
    conn = fakelibvirt.connection_for(host_documents(
        node_devices=[pci_device("0000:81:00.0", 0x8086, 0x10fb)],
        hostname="h1"))
    computer = conn.nodeDeviceLookupByName("computer")
    assert computer.XMLDesc(0) == computer_device(hostname="h1").xml
    parents = {d.name(): d.parent() for d in conn.listAllDevices(0)}
    assert parents == {"computer": None, "pci_0000_81_00_0": "computer"}
    own = computer_device("00000000-0000-0000-0000-000000000001")
    assert host_documents(computer=own).node_devices["computer"] == own.xml
    assert "computer" not in host_documents(computer=False).node_devices


@pytest.fixture(scope="module")
def nodedev_schema(in_ci):
    if not SCHEMA.is_file():
        message = (f"libvirt's RelaxNG schema {SCHEMA} is missing; Debian's "
                   "libvirt0 package ships it (`./run setup` as root "
                   "installs it)")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    return etree.RelaxNG(file=str(SCHEMA))


SHAPES = {
    "computer": computer_device,
    "vpd": lambda: pci_device("0000:42:00.0", 0x15b3, 0xa2d6, vpd=VPD(
        "NIC", serial_number="S1", vendor_fields={"0": "x"},
        asset_tag="t")),
    "vdpa": lambda: vdpa_device("vdpa0", parent="pci_0000_81_10_0"),
    "css-mdev": lambda: css_device(0, 0, 0x52, mdev_types=(CCW_IO,),
                                   channel_devno=0x815, driver="vfio_ccw"),
    "ap-matrix": ap_matrix_device,
    "ap-card": lambda: ap_card_device(0x0a),
    "ap-queue": lambda: ap_queue_device(0x0a, 0x1f),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shapes_validate(nodedev_schema, shape):
    xml = SHAPES[shape]().xml
    if not nodedev_schema.validate(etree.fromstring(xml.encode())):
        pytest.fail(f"{shape}: {nodedev_schema.error_log}\n{xml}")


def test_vdpa_and_s390_devices_list_as_libvirt():
    conn = fakelibvirt.connection_for(host_documents(node_devices=[
        vdpa_device("vdpa3"), css_device(0, 0, 0x52, mdev_types=(CCW_IO,)),
        ap_matrix_device(), ap_card_device(7), ap_queue_device(7, 0x38)]))
    assert conn.listDevices("vdpa", 0) == ["vdpa_vdpa3"]
    assert conn.nodeDeviceLookupByName("vdpa_vdpa3").XMLDesc(0).count(
        "<chardev>/dev/vhost-vdpa-3</chardev>") == 1
    assert conn.listDevices("mdev_types", 0) == ["ap_matrix", "css_0_0_0052"]
    assert conn.nodeDeviceLookupByName("ap_07_0038").parent() == "ap_card07"
    assert conn.nodeDeviceLookupByName("css_0_0_0052").listCaps() == [
        "css", "mdev_types"]


# -- loading libvirt's files ---------------------------------------------------------

INVALID = {"ccw_0_0_10000-invalid.xml", "css_0_0_10000-invalid.xml",
           "css_0_0_ffff_channel_dev_addr-invalid.xml"}


def _corpus_files():
    return sorted(p.name for p in NODEDEV.glob("*.xml")) if \
        NODEDEV.is_dir() else []


@pytest.mark.parametrize("name", _corpus_files() or ["computer.xml"])
def test_every_corpus_file_loads_or_is_refused_as_libvirt(name):
    path = NODEDEV / name
    if name in INVALID:
        with pytest.raises(NodeDeviceLoadError, match=r"outside 0-0xffff"):
            load_node_devices(path)
        return
    devices = load_node_devices(path)
    text = path.read_text()
    assert len(devices) == text.count("\n<device>") + text.startswith(
        "<device>")
    for device in devices:
        assert device.xml in text                # served as written
        assert device.name == etree.fromstring(
            device.xml.encode()).findtext("name")


def test_several_documents_in_one_file():
    devices = load_node_devices(NODEDEV / "mdevctl-list-multiple.out.xml")
    assert [d.name for d in devices] == [
        "mdev_200f228a_c80a_4d50_bfb7_f5a0e4e34045_0000_00_02_0",
        "mdev_de807ffc_1923_4d5f_b6c9_b20ecebc6d4b_0000_00_02_0",
        "mdev_435722ea_5f43_468a_874f_da34f1217f13_0000_00_02_0",
        "mdev_783e6dbb_ea0e_411f_94e2_717eaad438bf_matrix",
        "mdev_cc000052_9b13_9b13_9b13_cc23009b1326_0_0_0052"]
    assert {d.parent for d in devices} == {
        "pci_0000_00_02_0", "ap_matrix", "css_0_0_0052"}


def test_a_corpus_host_is_served():
    files = [NODEDEV / n for n in (
        "computer.xml", "pci_0000_42_00_0_vpd.xml", "ap_matrix_mdev_types.xml",
        "css_0_0_fffe_mdev_types.xml", "mdevctl-list-multiple.out.xml",
        "drm_renderD129.xml", "net_00_13_02_b9_f9_d3.xml")]
    conn = fakelibvirt.connection_for(host_documents(
        node_devices=load_node_devices(*files), computer=False))
    assert conn.numOfDevices(None, 0) == 11
    assert conn.listDevices("vpd", 0) == ["pci_0000_42_00_0"]
    assert len(conn.listDevices("mdev", 0)) == 5
    assert conn.nodeDeviceLookupByName("computer").XMLDesc(0) == \
        _corpus("computer.xml")


def test_a_directory_with_two_variants_of_one_device_is_refused(tmp_path):
    for name in ("pci_0000_02_10_7_sriov.xml", "pci_0000_02_10_7_sriov_vfs.xml"):
        (tmp_path / name).write_text(_corpus(name))
    with pytest.raises(NodeDeviceLoadError) as caught:
        load_node_devices(tmp_path)
    message = str(caught.value)
    assert "a second node device named 'pci_0000_02_10_7'" in message
    assert "pci_0000_02_10_7_sriov.xml" in message
    assert "pci_0000_02_10_7_sriov_vfs.xml" in message


@pytest.mark.parametrize(("text", "reason"), [
    ("<capabilities/>\n", "no <device> document starts a line"),
    ("junk\n<device><name>x</name><capability type='pci'/></device>\n",
     "text before the first <device>"),
    ("<device><capability type='pci'/></device>\n", "no <name>"),
    ("<device><name>x</name></device>\n", "has no <capability>"),
    ("<device><name>x</name><capability type='gpu'/></device>\n",
     "capability type 'gpu', not one of libvirt's"),
    ("<device><name>m</name><capability type='mdev'/></device>\n",
     "mdev 'm' has no <type id=...>"),
    ("<device><name>x</name>\n", "malformed XML"),
    ('<device><!DOCTYPE x [<!ENTITY a "b">]><name>x</name></device>\n',
     "DTD"),
], ids=["not-a-device", "leading-junk", "no-name", "no-capability",
        "unknown-capability", "mdev-no-type", "malformed", "entities"])
def test_bad_files_are_refused_naming_the_file(tmp_path, text, reason):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(NodeDeviceLoadError) as caught:
        load_node_devices(path)
    assert reason in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_directory_is_its_own_xml_files_sorted(tmp_path):
    (tmp_path / "b.xml").write_text(_corpus("ap_card07.xml"))
    (tmp_path / "a.xml").write_text(_corpus("computer.xml"))
    (tmp_path / "notes.txt").write_text("not a device")
    (tmp_path / "link.xml").symlink_to(NODEDEV / "css_0_0_ffff.xml")
    assert [d.name for d in load_node_devices(tmp_path)] == [
        "computer", "ap_card07"]


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(NodeDeviceLoadError, match="cannot read"):
        load_node_devices(tmp_path / "nope.xml")


# -- SR-IOV agreement ------------------------------------------------------------------

PF_ADDR, VF_ADDR = "0000:81:00.0", "0000:81:10.0"


def _pf(vfs=(VF_ADDR,)):
    return pci_device(PF_ADDR, 0x8086, 0x1572, virtual_functions=vfs,
                      max_vfs=8)


def _vf(pf=PF_ADDR, address=VF_ADDR):
    return pci_device(address, 0x8086, 0x154c, physical_function=pf)


def test_a_consistent_pf_and_vf_are_served():
    conn = fakelibvirt.connection_for(host_documents(
        node_devices=[_pf(), _vf()], complete_sriov=True))
    assert conn.listDevices("pci", 0) == ["pci_0000_81_00_0",
                                          "pci_0000_81_10_0"]


@pytest.mark.parametrize(("devices", "complete", "words"), [
    (lambda: [_pf(vfs=()), _vf()], False,
     "VF pci_0000_81_10_0 (0000:81:10.0) names PF pci_0000_81_00_0 "
     "(0000:81:00.0), which does not list it"),
    (lambda: [_pf(vfs=("0000:81:10.1",)), _vf()], False,
     "does not list it in virt_functions"),
    (lambda: [_pf(), pci_device(VF_ADDR, 0x8086, 0x154c)], False,
     "lists VF pci_0000_81_10_0 (0000:81:10.0), which names no "
     "phys_function"),
    (lambda: [_pf(), _vf(pf="0000:82:00.0")], False,
     "lists VF pci_0000_81_10_0 (0000:81:10.0), whose phys_function is "
     "0000:82:00.0; a VF has one PF"),
    (lambda: [_vf(pf="0000:82:00.0")], True,
     "names PF 0000:82:00.0, which is not on this host"),
    (lambda: [_vf()], True, "names PF 0000:81:00.0, which is not on this "
     "host"),
    (lambda: [_pf()], True, "lists VF 0000:81:10.0, which is not on this "
     "host"),
], ids=["pf-lists-none", "pf-lists-another", "vf-names-none",
        "vf-names-another-pf", "complete-absent-pf", "complete-vf-alone",
        "complete-pf-alone"])
def test_contradicting_sriov_is_refused(devices, complete, words):
    with pytest.raises(ValueError) as caught:
        host_documents(node_devices=devices(), complete_sriov=complete)
    assert words in str(caught.value)


def test_the_loader_checks_sriov_too(tmp_path):
    (tmp_path / "pf.xml").write_text(_pf(vfs=()).xml)
    (tmp_path / "vf.xml").write_text(_vf().xml)
    with pytest.raises(NodeDeviceLoadError, match="does not list it"):
        load_node_devices(tmp_path)
    # a corpus PF whose VFs are not loaded is fine unless asked otherwise
    pf = NODEDEV / "pci_0000_02_10_7_sriov_vfs.xml"
    assert len(load_node_devices(pf)) == 1
    with pytest.raises(NodeDeviceLoadError, match="not on this host"):
        load_node_devices(pf, complete_sriov=True)
