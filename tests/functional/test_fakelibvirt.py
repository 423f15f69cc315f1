"""fakelibvirt: libvirt's constants and errors, documents served, faults,
dropped connections, offline CPUs, and the real libvirt driver running on
it unchanged (through the pytest plugin's fixtures, which no conftest
defines: they come from the ``pytest11`` entry point)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time

import libvirt
import os_resource_classes as orc
import pytest

from tests.corpus import CORPUS
from virtdriver import fakelibvirt as fake_module
from virtdriver.fakelibvirt import constants
from virtdriver.fakelibvirt import event_loop as events
from virtdriver.fakelibvirt.documents import DomainCapsKey, HostDocuments

BASIC = CORPUS / "hostcaps" / "vircaps-x86_64-basic.xml"   # 4 cells x 4 CPUs
FULL = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"
Q35 = CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml"
TCG = CORPUS / "domcaps" / "qemu_6.2.0-tcg.x86_64.xml"

PCI_PF = """<device>
  <name>pci_0000_3b_00_0</name>
  <parent>computer</parent>
  <capability type='pci'>
    <domain>0</domain><bus>59</bus><slot>0</slot><function>0</function>
    <capability type='mdev_types'>
      <type id='nvidia-35'><availableInstances>4</availableInstances></type>
    </capability>
  </capability>
</device>
"""
MDEV = """<device>
  <name>mdev_4b20d080_1b54_4048_85b3_a6a62d165c01</name>
  <parent>pci_0000_3b_00_0</parent>
  <capability type='mdev'><type id='nvidia-35'/></capability>
</device>
"""
COMPUTER = ("<device>\n  <name>computer</name>\n"
            "  <capability type='system'/>\n</device>\n")


def basic_documents(**changes) -> HostDocuments:
    documents = HostDocuments(
        capabilities=BASIC.read_text(),
        domain_capabilities={DomainCapsKey("x86_64", "qemu"): Q35.read_text()},
        cpu_map=(16, (True,) * 16, 16), hostname="basic",
        node_devices={"computer": COMPUTER, "pci_0000_3b_00_0": PCI_PF,
                      "mdev_4b20d080_1b54_4048_85b3_a6a62d165c01": MDEV})
    return dataclasses.replace(documents, **changes)


def error_of(call, *args):
    with pytest.raises(fake_module.libvirtError) as caught:
        call(*args)
    return caught.value


@pytest.fixture
def real_test_conn():
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    conn = libvirt.open("test:///default")
    yield conn
    conn.close()


# -- the module: constants, errors, URIs ---------------------------------

def test_every_constant_equals_the_real_libvirt_one():
    names = [n for n in dir(constants) if n.startswith("VIR_")]
    assert len(names) > 200
    assert {n: getattr(constants, n) for n in names} == {
        n: getattr(libvirt, n) for n in names}
    real_errors = {n for n in dir(libvirt) if n.startswith(("VIR_ERR_",
                                                            "VIR_FROM_"))}
    assert real_errors <= set(names)   # every error code and domain


def test_the_module_never_imports_libvirt():
    code = ("import sys, virtdriver.fakelibvirt as f; f.open; "
            "sys.exit('libvirt' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_libvirt_error_has_the_real_interface():
    real = {n for n in vars(libvirt.libvirtError) if n.startswith("get_")}
    assert real <= set(vars(fake_module.libvirtError))
    bare = fake_module.libvirtError("boom")
    assert str(bare) == "boom" and bare.err is None
    assert bare.get_error_code() is None


@pytest.mark.parametrize("uri", ["qemu:///system", "fake:///missing",
                                 "fake://remote/h1", "test:///default"])
def test_unknown_uris_are_no_connect(fakelibvirt, uri):
    exc = error_of(fakelibvirt.open, uri)
    assert exc.err[:4] == (
        libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_FROM_NONE,
        f"no connection driver available for {uri}", libvirt.VIR_ERR_ERROR)
    assert exc.get_error_message() == str(exc)


def test_registered_host_opens_until_unregistered(fakelibvirt):
    host = fakelibvirt.register_host("h9", basic_documents())
    conn = fakelibvirt.open("fake:///h9")
    assert (conn.getURI(), conn.getHostname(), conn.isAlive()) == (
        "fake:///h9", "basic", 1)
    assert host.connections() == [conn]
    fakelibvirt.unregister_host("h9")
    assert error_of(fakelibvirt.open, "fake:///h9").get_error_code() == \
        libvirt.VIR_ERR_NO_CONNECT
    assert conn.getLibVersion() == 9000000   # open connections go on


# -- documents served ----------------------------------------------------

def test_serves_the_documents_it_was_given(fakelibvirt):
    tcg = TCG.read_text()
    documents = basic_documents(domain_capabilities={
        DomainCapsKey("x86_64", "qemu"): Q35.read_text(),
        DomainCapsKey("x86_64", "kvm", "pc", "/usr/bin/qemu-kvm"): tcg})
    conn = fakelibvirt.connection_for(documents)
    assert conn.getCapabilities() == BASIC.read_text()
    assert conn.getDomainCapabilities(None, "x86_64", None, "qemu") == \
        Q35.read_text()
    # arch None is the host's arch; virttype None kvm (a kvm one exists).
    assert conn.getDomainCapabilities(
        "/usr/bin/qemu-kvm", None, "pc", None, 0) == tcg
    # The emulator-None document answers for any emulator named.
    assert conn.getDomainCapabilities(
        "/opt/qemu", "x86_64", None, "qemu") == Q35.read_text()
    assert conn.getCPUMap() == (16, [True] * 16, 16)
    assert (conn.getLibVersion(), conn.getVersion()) == (9000000, 7002000)


def test_info_is_derived_from_the_capabilities(fakelibvirt):
    conn = fakelibvirt.connection_for(basic_documents())
    # 1+2+3+4 GiB over 4 cells of 4 CPUs; MHz is not in capabilities.
    assert conn.getInfo() == ["x86_64", 10240, 16, 0, 4, 1, 4, 1]
    given = fakelibvirt.connection_for(basic_documents(
        info=("x86_64", 1, 2, 3, 4, 5, 6, 7)))
    assert given.getInfo() == ["x86_64", 1, 2, 3, 4, 5, 6, 7]


def test_missing_documents_are_no_support(fakelibvirt):
    conn = fakelibvirt.connection_for(basic_documents())
    exc = error_of(conn.getDomainCapabilities, None, "aarch64", None, "kvm")
    assert (exc.get_error_code(), exc.get_error_domain()) == (
        libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_FROM_DOMAIN)
    assert exc.get_error_message() == (
        "this function is not supported by the connection driver: "
        "virConnectGetDomainCapabilities (no document for arch='aarch64', "
        "virttype='kvm', machine=None, emulatorbin=None)")
    bare = fakelibvirt.connection_for(HostDocuments())
    for call in (bare.getCapabilities, bare.getCPUMap, bare.getInfo):
        assert error_of(call).get_error_code() == libvirt.VIR_ERR_NO_SUPPORT


def test_no_cpu_map_is_refused_as_real_libvirt_refuses_a_host_call(
        fakelibvirt, real_test_conn):
    """A host without a CPU map answers ``getCPUMap`` as a libvirt driver
    without ``nodeGetCPUMap`` does: ``virReportUnsupportedError`` in
    libvirt-host.c.  test:///default has no ``nodeGetMemoryParameters``,
    reported by that same code, so its error is the model, name aside."""
    with pytest.raises(libvirt.libvirtError) as real:
        real_test_conn.getMemoryParameters(0)
    model = tuple(field.replace("virNodeGetMemoryParameters",
                                "virNodeGetCPUMap")
                  if isinstance(field, str) else field
                  for field in real.value.err)
    conn = fakelibvirt.connection_for(basic_documents(cpu_map=None))
    assert error_of(conn.getCPUMap).err == model
    assert model[0] == libvirt.VIR_ERR_NO_SUPPORT


def test_read_only_connection_may_not_read_domain_capabilities(
        fakelibvirt, fake_libvirt_host, real_test_conn):
    uri = fake_libvirt_host(basic_documents())
    exc = error_of(fakelibvirt.openReadOnly(uri).getDomainCapabilities,
                   None, "x86_64", None, "qemu")
    real = libvirt.openReadOnly("test:///default")
    with pytest.raises(libvirt.libvirtError) as caught:
        real.getDomainCapabilities(None, "i686", None, "qemu", 0)
    real.close()
    assert exc.err == caught.value.err


def test_read_host_sees_the_fake_as_it_sees_test_default(
        fakelibvirt, real_test_conn):
    """libvirt's own fake host refuses domain capabilities; served its
    capabilities, fakelibvirt gives read_host the very same reading."""
    from virtdriver.drivers.libvirt.host import Unknown, read_host

    documents = HostDocuments(
        capabilities=real_test_conn.getCapabilities(),
        lib_version=real_test_conn.getLibVersion(),
        version=real_test_conn.getVersion())
    served = read_host(fakelibvirt.connection_for(documents), "u")
    # The real connection is read with the real module restored.
    import virtdriver.drivers.libvirt.host as host_module
    host_module.libvirt = libvirt
    try:
        real = read_host(real_test_conn, "u")
    finally:
        host_module.libvirt = fakelibvirt
    assert isinstance(real.domain, Unknown)
    assert served.domain == real.domain   # reason, error_code, error_name
    assert served.domain.error_name == "VIR_ERR_NO_SUPPORT"
    assert served.host == real.host
    assert served == real


# -- node devices --------------------------------------------------------

def test_node_devices_filter_by_capability(fakelibvirt):
    conn = fakelibvirt.connection_for(basic_documents())
    names = {d.name() for d in conn.listAllDevices(0)}
    assert len(names) == 3
    pci = conn.listAllDevices(libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)
    mdev = conn.listAllDevices(libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)
    types = conn.listAllDevices(
        libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES)
    assert [d.name() for d in pci] == [d.name() for d in types] == [
        "pci_0000_3b_00_0"]
    assert pci[0].listCaps() == ["pci", "mdev_types"]
    assert [d.parent() for d in mdev] == ["pci_0000_3b_00_0"]
    assert conn.nodeDeviceLookupByName("computer").XMLDesc(0) == COMPUTER
    exc = error_of(conn.nodeDeviceLookupByName, "nope")
    assert exc.err[:3] == (libvirt.VIR_ERR_NO_NODE_DEVICE,
                           libvirt.VIR_FROM_NODEDEV, "Node device not "
                           "found: no node device with matching name 'nope'")


def test_node_devices_answer_as_test_default_does(fakelibvirt,
                                                  real_test_conn):
    real = real_test_conn.listAllDevices(0)
    conn = fakelibvirt.connection_for(HostDocuments(node_devices={
        d.name(): d.XMLDesc(0) for d in real}))
    served = {d.name(): d for d in conn.listAllDevices(0)}
    for device in real:
        twin = served[device.name()]
        assert twin.parent() == device.parent()
        assert twin.listCaps()[0] == device.listCaps()[0]
    for flag in ("SCSI_HOST", "FC_HOST", "VPORTS", "SYSTEM", "PCI_DEV"):
        value = getattr(libvirt, f"VIR_CONNECT_LIST_NODE_DEVICES_CAP_{flag}")
        assert sorted(d.name() for d in conn.listAllDevices(value)) == \
            sorted(d.name() for d in real_test_conn.listAllDevices(value))


# -- baseline and compare ------------------------------------------------

HOST_CPU = """<cpu><arch>x86_64</arch><model>Skylake</model>
<vendor>Intel</vendor><feature name='vmx'/><feature name='aes'/></cpu>"""


def test_baseline_keeps_the_features_every_cpu_has(fakelibvirt,
                                                   real_test_conn):
    conn = fakelibvirt.connection_for(basic_documents())
    other = ("<cpu><arch>x86_64</arch><model>Haswell</model>"
             "<vendor>Intel</vendor><feature name='aes'/>"
             "<feature name='avx'/></cpu>")
    assert conn.baselineCPU([HOST_CPU, other], 0) == (
        "<cpu mode='custom' match='exact'>\n"
        "  <model fallback='forbid'>Skylake</model>\n"
        "  <vendor>Intel</vendor>\n"
        "  <feature policy='require' name='aes'/>\n</cpu>\n")
    with pytest.raises(libvirt.libvirtError) as real:
        real_test_conn.baselineCPU([], 0)
    assert error_of(conn.baselineCPU, []).err == real.value.err


def test_compare_cpu_against_the_host(fakelibvirt):
    host = ("<cpu><arch>x86_64</arch><model>Skylake</model>"
            "<feature name='vmx'/><feature name='aes'/></cpu>")
    caps = BASIC.read_text().replace(
        "<cpu>\n      <arch>x86_64</arch>",
        "<cpu>\n      <arch>x86_64</arch>\n      <model>Skylake</model>"
        "\n      <feature name='vmx'/><feature name='aes'/>", 1)
    assert caps != BASIC.read_text()
    conn = fakelibvirt.connection_for(HostDocuments(capabilities=caps))
    assert conn.compareCPU(host, 0) == libvirt.VIR_CPU_COMPARE_IDENTICAL
    subset = "<cpu><model>Skylake</model><feature name='aes'/></cpu>"
    assert conn.compareCPU(subset, 0) == libvirt.VIR_CPU_COMPARE_SUPERSET
    more = "<cpu><feature name='avx512f'/></cpu>"
    assert conn.compareCPU(more, 0) == libvirt.VIR_CPU_COMPARE_INCOMPATIBLE
    forbid = "<cpu><feature policy='forbid' name='vmx'/></cpu>"
    assert conn.compareCPU(forbid, 0) == libvirt.VIR_CPU_COMPARE_INCOMPATIBLE
    exc = error_of(conn.compareCPU, more,
                   libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE)
    assert exc.get_error_code() == libvirt.VIR_ERR_CPU_INCOMPATIBLE
    assert "avx512f" in exc.get_error_message()


# -- faults, close, drop -------------------------------------------------

def test_fault_on_the_nth_call(fakelibvirt):
    conn = fakelibvirt.connection_for(basic_documents())
    conn.getDomainCapabilities(None, "x86_64", None, "qemu")
    conn.fail("getDomainCapabilities",
              error_code=libvirt.VIR_ERR_NO_SUPPORT, on_call=2)
    conn.getDomainCapabilities(None, "x86_64", None, "qemu")
    exc = error_of(conn.getDomainCapabilities, None, "x86_64", None, "qemu")
    assert exc.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT
    assert exc.get_error_message().endswith("virConnectGetDomainCapabilities")
    conn.getDomainCapabilities(None, "x86_64", None, "qemu")   # only the 2nd
    assert conn.calls("getDomainCapabilities") == 4
    conn.fail("getCapabilities", repeat=True, message="gone")
    for _ in range(2):
        assert str(error_of(conn.getCapabilities)) == "gone"


def test_global_fault_reaches_every_connection(fakelibvirt):
    seen = []
    fakelibvirt.registerErrorHandler(lambda ctx, err: seen.append(
        (ctx, err[0])), "ctx")
    try:
        fakelibvirt.fail("getLibVersion", on_call=2,
                         error_code=libvirt.VIR_ERR_RPC,
                         error_domain=libvirt.VIR_FROM_RPC)
        one = fakelibvirt.connection_for(basic_documents())
        two = fakelibvirt.connection_for(basic_documents())
        one.getLibVersion()
        exc = error_of(two.getLibVersion)
    finally:
        fakelibvirt.registerErrorHandler(None, None)
    assert (exc.get_error_code(), exc.get_error_domain()) == (
        libvirt.VIR_ERR_RPC, libvirt.VIR_FROM_RPC)
    assert seen == [("ctx", libvirt.VIR_ERR_RPC)]


def test_closed_connection_is_invalid(fakelibvirt, real_test_conn):
    conn = fakelibvirt.connection_for(basic_documents())
    assert conn.close() == 0
    exc = error_of(conn.getCapabilities)
    with pytest.raises(libvirt.libvirtError) as real:
        closed = libvirt.open("test:///default")
        closed.close()
        closed.getCapabilities()
    assert exc.err == real.value.err
    assert error_of(conn.close).get_error_code() == \
        libvirt.VIR_ERR_INVALID_CONN


def test_drop_fires_the_close_callback_and_fails_every_call(fakelibvirt):
    conn = fakelibvirt.connection_for(basic_documents())
    calls = []
    assert conn.registerCloseCallback(
        lambda c, reason, opaque: calls.append((c, reason, opaque)), "me") == 0
    conn.fail("getCPUMap", drop=True)
    for call in (conn.getCPUMap, conn.getCapabilities):
        exc = error_of(call)
        assert exc.err[:3] == (
            libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_FROM_RPC,
            "End of file while reading data: Input/output error")
    assert calls == [(conn, libvirt.VIR_CONNECT_CLOSE_REASON_EOF, "me")]
    assert conn.isAlive() == 0
    assert conn.close() == 0


def test_session_reopens_after_the_host_drops_it(fakelibvirt,
                                                 fake_libvirt_host):
    from virtdriver.drivers.libvirt.session import LibvirtSession

    uri = fake_libvirt_host(basic_documents(), name="h1")
    host = fakelibvirt.get_host("h1")
    sleeps = []
    session = LibvirtSession(uri, sleep=sleeps.append)
    first = session.reading()
    [conn] = host.connections()
    dropped = []
    conn.registerCloseCallback(lambda *args: dropped.append(args[1]), None)
    assert host.drop() == 1
    assert dropped == [libvirt.VIR_CONNECT_CLOSE_REASON_EOF]
    again = session.reading()
    assert session.reconnects == 1 and sleeps == [0.5]
    assert again.host == first.host
    [new] = host.connections()
    assert new is not conn and new.isAlive() == 1


def test_cpus_going_offline_between_reads(fakelibvirt, fake_libvirt_host):
    from virtdriver.drivers.libvirt.session import LibvirtSession

    session = LibvirtSession(fake_libvirt_host(basic_documents()))
    assert session.online_cpus() == frozenset(range(16))
    fakelibvirt.get_host("host1").set_online_cpus({0, 2, 3})
    assert session.online_cpus() == {0, 2, 3}
    assert session.call(lambda c: c.getCPUMap()) == (
        16, [True, False, True, True] + [False] * 12, 3)
    with pytest.raises(ValueError, match="0-15"):
        fakelibvirt.get_host("host1").set_online_cpus({16})


# -- the real driver, swapped -------------------------------------------

def test_real_libvirt_driver_publishes_a_numa_tree(fakelibvirt,
                                                   fake_libvirt_host):
    from virtdriver.drivers.libvirt.driver import LibvirtDriver
    from virtdriver.resource_tracker.provider_tree import ProviderTree

    fake_libvirt_host(basic_documents(), name="h1")
    driver = LibvirtDriver(uri="fake:///h1")
    driver.init_host("compute-1")
    tree = ProviderTree()
    driver.update_provider_tree(tree, "compute-1")
    cells = [tree.record(f"compute-1_NUMA{i}").inventory for i in range(4)]
    assert [c[orc.VCPU].total for c in cells] == [4, 4, 4, 4]
    # libvirt's test data gives these cells more huge pages than memory
    # (cell 0: 1 GiB, with 8 GiB of 2 MiB pages): no small-page memory is
    # left, so no cell offers MEMORY_MB, only its pages.
    assert all(orc.MEMORY_MB not in c for c in cells)
    assert [c["CUSTOM_MEM_PAGE_SIZE_2048"].total for c in cells] == [
        4096, 6144, 8192, 10240]
    facts = driver.node_capabilities("compute-1").facts
    assert facts["uri"] == "fake:///h1"
    assert facts["domain_capabilities"][0]["read"] is True

    fakelibvirt.get_host("h1").set_online_cpus(set(range(16)) - {0, 1})
    driver.update_provider_tree(tree, "compute-1")
    assert tree.record("compute-1_NUMA0").inventory[orc.VCPU].total == 2
    driver.cleanup_host("compute-1")


def test_swap_rebinds_and_restores(monkeypatch):
    import virtdriver.drivers.libvirt.connection as connection
    import virtdriver.drivers.libvirt.session as session

    monkeypatch.setattr(connection, "_loop_started", False)
    with fake_module.use_fakelibvirt() as module:
        assert sys.modules["libvirt"] is module is fake_module
        assert session.libvirt is connection.libvirt is module
        connection.ensure_event_loop()   # safe: no loop thread on the fake
        assert connection._loop_started
        with fake_module.use_fakelibvirt():   # nested: a no-op
            pass
        assert session.libvirt is module
    assert sys.modules["libvirt"] is libvirt
    assert session.libvirt is connection.libvirt is libvirt
    # The real loop is still to be registered by the next real open.
    assert connection._loop_started is False


def test_event_loop_iteration_waits_instead_of_spinning(monkeypatch):
    monkeypatch.setattr(events, "ITERATION_SECONDS", 0.05)
    assert fake_module.virEventRegisterDefaultImpl() == 0
    start = time.monotonic()
    assert fake_module.virEventRunDefaultImpl() == 0
    assert time.monotonic() - start >= 0.04
    # Woken, an iteration ends at once rather than after its hour: a
    # minute's wait for it tells the two apart on the busiest machine.
    monkeypatch.setattr(events, "ITERATION_SECONDS", 3600)
    events.wake()
    iteration = threading.Thread(target=fake_module.virEventRunDefaultImpl,
                                 daemon=True)
    iteration.start()
    iteration.join(timeout=60)
    woken = not iteration.is_alive()
    events.wake()  # let a stuck iteration go
    assert woken, "a woken iteration still waited after 60 s"


def test_plugin_is_installed_as_a_pytest11_entry_point(request):
    from importlib.metadata import entry_points

    [point] = [p for p in entry_points(group="pytest11")
               if p.name == "virtdriver_fakelibvirt"]
    assert point.value == "virtdriver.fakelibvirt.pytest_plugin"
    assert request.config.pluginmanager.has_plugin("virtdriver_fakelibvirt")


def test_fixture_loads_the_builders_when_installed(fakelibvirt,
                                                  fake_libvirt_host):
    from virtdriver.drivers.libvirt.driver import LibvirtDriver
    from virtdriver.resource_tracker.provider_tree import ProviderTree

    builders = pytest.importorskip("virtdriver.fakelibvirt.builders")
    assert fakelibvirt.builders is builders
    documents = builders.host_documents(
        host=builders.HostBuilder(cells=2, cores=2, threads=2),
        domcaps=[builders.DomainCapsBuilder("x86_64", "pc-q35-7.2", "kvm")])
    driver = LibvirtDriver(uri=fake_libvirt_host(documents, name="built"))
    driver.init_host("built-1")
    tree = ProviderTree()
    driver.update_provider_tree(tree, "built-1")
    assert [tree.record(f"built-1_NUMA{i}").inventory[orc.VCPU].total
            for i in (0, 1)] == [4, 4]


def test_recorded_refusals_are_refused_again_alike():
    from virtdriver.fakelibvirt.documents import (
        DomainCapsKey, HostDocuments, RecordedError)
    from virtdriver import fakelibvirt as fake
    documents = HostDocuments(domain_capabilities_errors={
        DomainCapsKey("x86_64", "kvm"): RecordedError(
            fake.VIR_ERR_OPERATION_FAILED, fake.VIR_FROM_QEMU, "probe died")})
    conn = fake.connection_for(documents)
    with pytest.raises(fake.libvirtError) as info:
        conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
    assert info.value.get_error_code() == fake.VIR_ERR_OPERATION_FAILED
    assert info.value.get_error_domain() == fake.VIR_FROM_QEMU
    assert info.value.get_error_message() == "probe died"
    with pytest.raises(fake.libvirtError) as other:
        conn.getDomainCapabilities(None, "aarch64", None, "kvm", 0)
    assert other.value.get_error_code() == fake.VIR_ERR_NO_SUPPORT
