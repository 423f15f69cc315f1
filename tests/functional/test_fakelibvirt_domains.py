"""fakelibvirt's domains: what a running domain holds of the host (memory,
CPUs, NUMA nodes, host devices), hostdev attach/detach, node device
detach/re-attach, events on the loop thread, every missing call a
libvirt error, and the missing-package hint."""

from __future__ import annotations

import inspect
import re
import threading
import warnings

import libvirt
import pytest

from virtdriver import fakelibvirt as fake
from virtdriver.fakelibvirt import api_table, real_guard
from virtdriver.fakelibvirt.builders import (
    HostBuilder, host_documents, mdev_device, pci_device)

VF = "0000:81:00.1"
MDEV = "4b20d080-1b54-4048-85b3-a6a62d165c01"


def hostdev(address: str = VF, managed: str = "yes") -> str:
    domain, bus, rest = address.split(":")
    slot, function = rest.split(".")
    return (f"<hostdev mode='subsystem' type='pci' managed='{managed}'>"
            f"<source><address domain='0x{domain}' bus='0x{bus}' "
            f"slot='0x{slot}' function='0x{function}'/></source></hostdev>")


MDEV_HOSTDEV = ("<hostdev mode='subsystem' type='mdev' model='vfio-pci'>"
                f"<source><address uuid='{MDEV}'/></source></hostdev>")


def guest(name: str, mib: int = 1024, extra: str = "", vcpu: str = "2"
          ) -> str:
    return (f"<domain type='kvm'><name>{name}</name>"
            f"<memory unit='MiB'>{mib}</memory><vcpu{vcpu_attrs(vcpu)}"
            f"<os><type>hvm</type></os>{extra}</domain>")


def vcpu_attrs(spec: str) -> str:
    count, _, cpuset = spec.partition("@")
    return (f" cpuset='{cpuset}'>{count}</vcpu>" if cpuset
            else f">{count}</vcpu>")


@pytest.fixture
def conn(fakelibvirt, fake_libvirt_host):
    documents = host_documents(
        host=HostBuilder(cells=2, cores=4, memory_mb_per_cell=4096),
        node_devices=[pci_device("0000:81:00.0", 0x8086, 0x1572, numa_node=1,
                                 virtual_functions=[VF]),
                      pci_device(VF, 0x8086, 0x154c, numa_node=1,
                                 physical_function="0000:81:00.0"),
                      mdev_device(MDEV, "nvidia-35", "0000:81:00.0")])
    return fakelibvirt.open(fake_libvirt_host(documents, name="dom-host"))


def error(call, *args):
    with pytest.raises(fake.libvirtError) as raised:
        call(*args)
    return raised.value.err[:3]


def test_running_domains_hold_host_memory(conn):
    assert conn.getCellsFreeMemory(0, 2) == [4 << 30, 4 << 30]
    bound = conn.defineXML(guest("bound", 2048, "<numatune><memory "
                                 "nodeset='1'/></numatune>"))
    assert conn.getFreeMemory() == 8 << 30          # defined: holds nothing
    bound.create()
    assert conn.getCellsFreeMemory(0, 2) == [4 << 30, 2 << 30]
    spread = conn.createXML(guest("spread", 1024), 0)
    assert conn.getMemoryStats(-1)["free"] == (8 << 20) - (3 << 20)
    spread.setMemory(512 * 1024)
    assert conn.getMemoryStats(0) == {"total": 4 << 20,
                                      "free": (4 << 20) - (256 << 10)}
    bound.destroy()
    spread.destroy()
    assert conn.getFreeMemory() == 8 << 30


def test_host_refuses_cpus_and_cells_it_lacks(conn):
    assert error(conn.createXML, guest("cpus", vcpu="2@60-61"), 0)[0] == \
        fake.VIR_ERR_SYSTEM_ERROR
    cell = error(conn.createXML, guest("cell", extra="<numatune><memory "
                                       "nodeset='3'/></numatune>"), 0)
    assert cell == (fake.VIR_ERR_CONFIG_UNSUPPORTED, fake.VIR_FROM_NONE,
                    "unsupported configuration: NUMA node 3 is unavailable")
    missing = error(conn.createXML, guest("dev", extra="<devices>" + hostdev(
        "0000:09:00.0") + "</devices>"), 0)
    assert missing[:2] == (fake.VIR_ERR_SYSTEM_ERROR, fake.VIR_FROM_NONE)
    assert "Device 0000:09:00.0 not found" in missing[2]
    assert conn.listAllDomains() == []               # nothing was left


def test_pinned_vcpus_follow_the_host(conn):
    dom = conn.createXML(guest("pin", vcpu="2@0-1"), 0)
    info, maps = dom.vcpus()
    assert [v[0] for v in info] == [0, 1] and maps[0][:3] == (True, True,
                                                             False)
    dom.pinVcpu(1, (False, False, False, True))
    assert dom.vcpus()[1][1][3] and not dom.vcpus()[1][1][0]
    conn.set_online_cpus(set(range(8)) - {5})
    assert error(dom.pinVcpu, 0, (False,) * 5 + (True,))[0] == \
        fake.VIR_ERR_SYSTEM_ERROR


def test_a_device_held_by_a_running_guest_is_busy_for_another(conn):
    one = conn.createXML(guest("one"), 0)
    two = conn.createXML(guest("two"), 0)
    one.attachDeviceFlags(hostdev(), fake.VIR_DOMAIN_AFFECT_LIVE)
    busy = (fake.VIR_ERR_OPERATION_INVALID, fake.VIR_FROM_NONE,
            "Requested operation is not valid: PCI device 0000:81:00.1 is "
            "in use by driver QEMU, domain one")
    assert error(two.attachDeviceFlags, hostdev(), 0) == busy
    device = conn.nodeDeviceLookupByName("pci_0000_81_00_1")
    assert error(device.detachFlags, None, 0) == busy
    assert error(device.reAttach) == busy
    assert "<alias name='hostdev0'/>" in one.XMLDesc(0)
    one.detachDeviceFlags(hostdev(), fake.VIR_DOMAIN_AFFECT_LIVE)
    assert error(one.detachDeviceFlags, hostdev(), 0)[0] == \
        fake.VIR_ERR_DEVICE_MISSING
    two.attachDeviceFlags(hostdev(), 0)
    two.destroy()                                   # lets it go
    assert device.detachFlags(None, 0) == 0 and device.reAttach() == 0


def test_mdev_hostdev_and_a_guest_started_with_a_held_device(conn):
    config = "<devices>" + MDEV_HOSTDEV + "</devices>"
    first = conn.defineXML(guest("first", extra=config))
    second = conn.defineXML(guest("second", extra=config))
    first.create()
    code, _, message = error(second.create)
    assert code == fake.VIR_ERR_OPERATION_INVALID
    assert message.endswith(f"mediated device /sys/bus/mdev/devices/{MDEV} "
                            "is in use by driver QEMU, domain first")
    assert second.isActive() == 0
    first.shutdown()
    assert second.create() == 0
    other = MDEV_HOSTDEV.replace(MDEV, "00000000-0000-0000-0000-000000000001")
    assert error(conn.createXML, guest("x", extra="<devices>" + other +
                                       "</devices>"), 0)[0] == \
        fake.VIR_ERR_DEVICE_MISSING


def test_config_attach_changes_only_the_definition(conn):
    dom = conn.defineXML(guest("cfg"))
    assert error(dom.attachDeviceFlags, hostdev(),
                 fake.VIR_DOMAIN_AFFECT_LIVE)[0] == \
        fake.VIR_ERR_OPERATION_INVALID
    dom.attachDeviceFlags(hostdev(), fake.VIR_DOMAIN_AFFECT_CONFIG)
    assert "0x81" in dom.XMLDesc(fake.VIR_DOMAIN_XML_INACTIVE)
    assert error(dom.attachDeviceFlags, "<disk type='file'/>", 0)[0] == \
        fake.VIR_ERR_OPERATION_UNSUPPORTED


def test_events_arrive_on_the_loop_thread_as_libvirt_python_calls_them(
        conn, fakelibvirt_event_loop):
    seen, removed = [], []
    conn.domainEventRegisterAny(
        None, fake.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
        lambda c, d, e, detail, o: seen.append(
            (c is conn, d.name(), e, detail, o,
             threading.current_thread().name)), "opaque")
    conn.domainEventRegisterAny(
        None, fake.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
        lambda c, d, alias, o: removed.append(alias), None)
    dom = conn.createXML(guest("ev"), 0)
    dom.attachDeviceFlags(hostdev(), 0)
    dom.detachDeviceFlags(hostdev(), 0)
    dom.destroy()
    assert fakelibvirt_event_loop(60), "the loop thread never ran"
    loop = "fakelibvirt-event-loop"
    assert seen == [(True, "ev", fake.VIR_DOMAIN_EVENT_STARTED,
                     fake.VIR_DOMAIN_EVENT_STARTED_BOOTED, "opaque", loop),
                    (True, "ev", fake.VIR_DOMAIN_EVENT_STOPPED,
                     fake.VIR_DOMAIN_EVENT_STOPPED_DESTROYED, "opaque",
                     loop)]
    assert removed == ["hostdev0"]


# -- everything else is a libvirt error ---------------------------------------

def _c_function(method) -> str | None:
    found = re.search(r"libvirtmod\.(vir\w+)", inspect.getsource(method))
    return found.group(1) if found else None


@pytest.mark.parametrize("cls", ["virConnect", "virDomain", "virNodeDevice"])
def test_every_libvirt_python_method_exists_and_the_rest_are_no_support(
        conn, cls):
    dom = conn.createXML(guest("any"), 0)
    objects = {"virConnect": conn, "virDomain": dom,
               "virNodeDevice": conn.nodeDeviceLookupByName(
                   "pci_0000_81_00_0")}
    obj = objects[cls]
    real_class = getattr(libvirt, cls)
    names = [n for n in dir(real_class) if not n.startswith("_")]
    assert len(names) > 15
    for name in names:
        attribute = getattr(obj, name)          # never AttributeError
        assert callable(attribute), name
        function = _c_function(getattr(real_class, name))
        assert api_table.METHODS[cls].get(name) == function, name
        if getattr(attribute, "__name__", None) != function or \
                hasattr(type(obj), name):
            continue                            # implemented by the fake
        with pytest.raises(fake.libvirtError) as raised:
            attribute()
        assert raised.value.get_error_code() == fake.VIR_ERR_NO_SUPPORT
        assert str(raised.value) == ("this function is not supported by the "
                                     f"connection driver: {function}")


def test_every_module_function_and_constant_of_libvirt_python():
    for name in dir(libvirt):
        value = getattr(libvirt, name)
        if name.startswith("VIR_"):
            assert getattr(fake, name) == value, name
        elif (not name.startswith("_") and inspect.isfunction(value)
              and value.__module__ == "libvirt"):
            assert callable(getattr(fake, name)), name
    assert fake.getVersion() == 9000000
    with pytest.raises(fake.libvirtError) as raised:
        fake.virEventAddHandle(0, 0, None, None)
    assert raised.value.get_error_code() == fake.VIR_ERR_NO_SUPPORT
    with pytest.raises(AttributeError):
        fake.no_such_name  # noqa: B018


# -- the missing-package hint -------------------------------------------------

def test_a_fake_uri_reaching_the_real_libvirt_names_the_module(fakelibvirt):
    with pytest.raises(libvirt.libvirtError) as raised:
        libvirt.open("fake:///host1")   # this test module holds the real one
    assert raised.value.get_error_code() == libvirt.VIR_ERR_NO_CONNECT
    message = str(raised.value)
    assert f"module {__name__!r} still holds the real libvirt" in message
    assert "fakelibvirt_packages" in message


def test_code_under_test_opening_a_real_connection_warns(fakelibvirt):
    namespace = {"__name__": "mydriver.conn", "libvirt": libvirt}
    exec("def connect():\n    return libvirt.open('test:///default')\n",
         namespace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace["connect"]().close()
    assert any(issubclass(w.category, real_guard.RealLibvirtWarning)
               and "'mydriver' to the ini option fakelibvirt_packages"
               in str(w.message) for w in caught)


def test_events_need_a_registered_loop_and_one_callback_per_id(
        conn, monkeypatch):
    monkeypatch.setattr(fake.event_loop, "_registered", False)
    refused = error(conn.domainEventRegisterAny, None,
                    fake.VIR_DOMAIN_EVENT_ID_LIFECYCLE, print, None)
    assert refused == (fake.VIR_ERR_INTERNAL_ERROR, fake.VIR_FROM_NONE,
                       "internal error: could not initialize domain event "
                       "timer")
    # node device events too, in the same words (libvirt's are generic)
    assert error(conn.nodeDeviceEventRegisterAny, None,
                 fake.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE, print,
                 None) == refused
    fake.virEventRegisterDefaultImpl()
    first = conn.domainEventRegisterAny(None, 0, print, None)
    assert error(conn.domainEventRegisterAny, None, 0, print, None)[2] == \
        "invalid argument: event callback already tracked"
    conn.domainEventDeregisterAny(first)
    assert error(conn.domainEventDeregisterAny, first)[0] == \
        fake.VIR_ERR_INVALID_ARG


def test_domain_calls_take_faults_and_count_like_connection_calls(conn):
    dom = conn.defineXML(guest("faulty"))
    conn.fail("create", error_code=fake.VIR_ERR_OPERATION_FAILED)
    assert error(dom.create)[0] == fake.VIR_ERR_OPERATION_FAILED
    assert dom.isActive() == 0                  # the fault came first
    assert dom.create() == 0
    assert conn.calls("create") == 2 and conn.calls("createWithFlags") == 0
    conn.drop()
    assert error(dom.info)[0] == fake.VIR_ERR_SYSTEM_ERROR
