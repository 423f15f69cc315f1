"""fakelibvirt's domains agree with real libvirt: the same call sequences
run against ``test:///default`` (libvirt in-process) and against
fakelibvirt serving a host recorded from it, comparing return values,
error codes and domains, the domains listed, and the lifecycle events
delivered through each one's event loop.

``test:///default`` keeps one state per process, whatever connection
opens it (a second ``open`` sees the first one's domains, and closing
every connection keeps them): each sequence first removes every domain
but its own ``test`` and makes sure ``test`` runs; the fake host is new
for each sequence and gets ``test`` from the same XML.  Domain ids grow
across sequences on the real side, so ids are compared by order of
appearance.

What the two answer differently on purpose is :data:`DIFFERENCES` (each
listed in ``docs/fakelibvirt.md`` with its reason): where the test driver
answers in its own way, fakelibvirt answers as libvirt's QEMU driver.
"""

from __future__ import annotations

import itertools
import pathlib
import threading
import time
import uuid

import libvirt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from virtdriver import fakelibvirt
from virtdriver.drivers.libvirt.recorder import record_host

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "fakelibvirt.md"
NAMES = ("a", "b", "c")
UUIDS = {n: str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{n}.agreement.test"))
         for n in NAMES}
SENTINEL = "zz-sentinel"
#: test:///'s driver errors come from VIR_FROM_TEST, the QEMU driver's
#: (which fakelibvirt answers as) from VIR_FROM_QEMU.
DRIVER_DOMAINS = {libvirt.VIR_FROM_TEST: "driver",
                  libvirt.VIR_FROM_QEMU: "driver"}
#: (call, domain state before, what test:/// answers) -> what fakelibvirt
#: answers instead, as libvirt's QEMU driver does; the doc names each by
#: the text after "#".
DIFFERENCES = {
    ("shutdown", "shutoff", ("err", 1, "driver")):
        ("err", 55, libvirt.VIR_FROM_DOMAIN),      # shutdown of a stopped
    ("suspend", "shutoff", ("err", 1, "driver")):
        ("err", 55, libvirt.VIR_FROM_DOMAIN),      # suspend of a stopped
    ("resume", "shutoff", ("err", 1, "driver")):
        ("err", 55, libvirt.VIR_FROM_DOMAIN),      # resume of a stopped
    ("resume", "running", ("err", 1, "driver")):
        ("err", 55, "driver"),                     # resume of a running
    ("suspend", "paused", ("err", 1, "driver")): ("ok", 0),  # suspend paused
    ("start", "running", ("err", 1, "driver")):
        ("err", 55, "driver"),                     # start of a running
    ("undefine", "running-transient", ("ok", 0)):
        ("err", 55, "driver"),                     # undefine of a transient
    ("undefine", "paused-transient", ("ok", 0)):
        ("err", 55, "driver"),
    ("resume", "running-transient", ("err", 1, "driver")):
        ("err", 55, "driver"),
    ("suspend", "paused-transient", ("err", 1, "driver")): ("ok", 0),
    ("start", "running-transient", ("err", 1, "driver")):
        ("err", 55, "driver"),
}
#: The doc's words for each difference, in DIFFERENCES' order.
DOC_PHRASES = ("shutdown of a stopped domain", "suspend of a stopped domain",
               "resume of a stopped domain", "resume of a running domain",
               "suspend of a paused domain", "start of a running domain",
               "undefine of a transient domain", "event callback already tracked",
               "getFreeMemory", "getMemoryStats", "attachDeviceFlags",
               "nodeDeviceDetachFlags", "vcpus", "XMLDesc", "CPU time",
               "VIR_FROM_TEST")


def xml(name: str, memory_kib: int = 524288, vcpus: int = 1) -> str:
    return (f"<domain type='test'><name>{name}</name>"
            f"<uuid>{UUIDS.get(name, str(uuid.uuid5(uuid.NAMESPACE_DNS, name)))}"
            f"</uuid><memory>{memory_kib}</memory><vcpu>{vcpus}</vcpu>"
            "<os><type>hvm</type></os></domain>")


class Side:
    """One libvirt (real or fake): a connection, its events, its answers."""

    def __init__(self, module, conn) -> None:
        self.module, self.conn = module, conn
        self.events: list[tuple[str, int, int]] = []
        self.ids: dict[int, int] = {}
        self.callback = conn.domainEventRegisterAny(
            None, module.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._event, None)

    def _event(self, conn, dom, event, detail, opaque) -> None:
        self.events.append((dom.name(), event, detail))

    def norm_id(self, value: int) -> int:
        if value < 0:
            return value
        return self.ids.setdefault(value, len(self.ids) + 1)

    def state_of(self, name: str) -> str:
        try:
            dom = self.conn.lookupByName(name)
            state, persistent = dom.state()[0], dom.isPersistent()
        except self.module.libvirtError:
            return "absent"
        return {self.module.VIR_DOMAIN_RUNNING: "running",
                self.module.VIR_DOMAIN_PAUSED: "paused"}.get(
                    state, "shutoff") + ("" if persistent else "-transient")

    def run(self, op: str, name: str, arg: int = 0):
        return self.run_call(lambda: OPS[op](self, name, arg))

    def run_call(self, call):
        """``call()``'s answer, normalised as :meth:`run`'s."""
        try:
            return ("ok", self.normalise(call()))
        except self.module.libvirtError as exc:
            domain = exc.get_error_domain()
            return ("err", exc.get_error_code(),
                    DRIVER_DOMAINS.get(domain, domain))

    def normalise(self, value):
        if isinstance(value, (list, tuple)):
            return [self.normalise(v) for v in value]
        if hasattr(value, "UUIDString"):
            return value.name()
        return value

    def settle(self) -> list[tuple[str, int, int]]:
        """The events so far, once a sentinel's define and undefine have
        come through the loop (events arrive in order); the sentinel's
        own are dropped."""
        before = sum(e[0] == SENTINEL for e in self.events)
        assert before == 0
        self.conn.defineXML(xml(SENTINEL)).undefine()
        deadline = time.monotonic() + 60
        while (sum(e[0] == SENTINEL for e in self.events) < 2
               and time.monotonic() < deadline):
            time.sleep(0.005)
        assert sum(e[0] == SENTINEL for e in self.events) == 2, \
            "the sentinel's events never came"
        self.events[:] = [e for e in self.events if e[0] != SENTINEL]
        return list(self.events)

    def close(self) -> None:
        self.conn.domainEventDeregisterAny(self.callback)


def _info(side, name, _):
    info = side.conn.lookupByName(name).info()
    return info[:4]                       # CPU time: see DOC_PHRASES


def _list(side, _, flags):
    return sorted(d.name() for d in side.conn.listAllDomains(flags))


OPS = {
    "define": lambda s, n, _: s.conn.defineXML(xml(n)),
    "create_xml": lambda s, n, _: s.conn.createXML(xml(n), 0),
    "start": lambda s, n, _: s.conn.lookupByName(n).create(),
    "destroy": lambda s, n, _: s.conn.lookupByName(n).destroy(),
    "shutdown": lambda s, n, _: s.conn.lookupByName(n).shutdown(),
    "suspend": lambda s, n, _: s.conn.lookupByName(n).suspend(),
    "resume": lambda s, n, _: s.conn.lookupByName(n).resume(),
    "undefine": lambda s, n, _: s.conn.lookupByName(n).undefine(),
    "lookup_uuid": lambda s, n, _: s.conn.lookupByUUIDString(UUIDS[n]),
    "lookup_id": lambda s, n, _: s.norm_id(
        s.conn.lookupByID(s.conn.lookupByName(n).ID()).ID()),
    "id": lambda s, n, _: s.norm_id(s.conn.lookupByName(n).ID()),
    "info": _info,
    "state": lambda s, n, _: s.conn.lookupByName(n).state(),
    "is_active": lambda s, n, _: s.conn.lookupByName(n).isActive(),
    "is_persistent": lambda s, n, _: s.conn.lookupByName(n).isPersistent(),
    "set_memory": lambda s, n, kib: s.conn.lookupByName(n).setMemory(kib),
    "xml_names": lambda s, n, _: _xml_fields(s.conn.lookupByName(n)),
    "list": _list,
}
LIST_FLAGS = [0] + [getattr(libvirt, f"VIR_CONNECT_LIST_DOMAINS_{f}") for f in (
    "ACTIVE", "INACTIVE", "PERSISTENT", "TRANSIENT", "RUNNING", "PAUSED",
    "SHUTOFF", "OTHER", "NO_MANAGEDSAVE", "NO_AUTOSTART", "NO_SNAPSHOT")]


def _xml_fields(dom):
    """What of ``XMLDesc`` both fill in the same way (see the doc)."""
    from lxml import etree
    root = etree.fromstring(dom.XMLDesc(0))
    return [root.get("id") is not None, root.findtext("name"),
            root.findtext("uuid"), root.findtext("memory"),
            root.findtext("currentMemory"), root.findtext("vcpu")]


# -- the two sides -------------------------------------------------------------

@pytest.fixture(scope="module")
def loops():
    """Both default event loops registered and each run by a thread, as
    libvirt-python programs run them; stopped after the module, so no
    other test shares the fake's loop with them."""
    stop = threading.Event()
    threads = []
    for module in (libvirt, fakelibvirt):
        module.virEventRegisterDefaultImpl()
        thread = threading.Thread(target=_loop, args=(module, stop),
                                  daemon=True, name=f"{module.__name__}-loop")
        thread.start()
        threads.append(thread)
    yield
    stop.set()
    fakelibvirt.event_loop.wake()
    # libvirt's loop sleeps in poll() until something is due: a timer.
    libvirt.virEventAddTimeout(0, lambda timer, _: libvirt.virEventRemoveTimeout(
        timer), None)
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), f"{thread.name} did not stop"


def _loop(module, stop: threading.Event) -> None:
    while not stop.is_set():
        module.virEventRunDefaultImpl()


@pytest.fixture(scope="module")
def recorded(loops):
    """test:///default's host, recorded as virtdriver records any host,
    and the XML of its own domain ``test``."""
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    conn = libvirt.open("test:///default")
    documents = record_host(conn, "test:///default")
    test_xml = conn.lookupByName("test").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    yield conn, documents, test_xml
    conn.close()


_hosts = itertools.count(1)


@pytest.fixture
def sides(recorded):
    """A function: a fresh (real, fake) pair, both holding only ``test``,
    running."""
    conn, documents, test_xml = recorded
    opened: list[Side] = []
    hosts: list[str] = []

    def make():
        while opened:   # one lifecycle callback per connection at a time
            opened.pop().close()
        reset_real(conn, test_xml)
        name = f"agreement-{next(_hosts)}"
        fakelibvirt.register_host(name, documents)
        hosts.append(name)
        fake_conn = fakelibvirt.open(f"fake:///{name}")
        fake_conn.defineXML(test_xml).create()
        pair = (Side(libvirt, conn), Side(fakelibvirt, fake_conn))
        opened.extend(pair)
        for side in pair:
            side.norm_id(side.conn.lookupByName("test").ID())
            # The reset's own events (test redefined, started) may reach
            # the new callback late on a busy machine: not the sequence's.
            side.settle()
            side.events.clear()
        return pair

    yield make
    for side in opened:
        side.close()
    for name in hosts:
        fakelibvirt.unregister_host(name)
    reset_real(conn, test_xml)   # test:///default as other tests expect it


def reset_real(conn, test_xml: str) -> None:
    """test:///default with its own running ``test`` domain only."""
    for dom in conn.listAllDomains():
        if dom.name() == "test":
            continue
        for step in (dom.destroy, dom.undefine):
            try:
                step()
            except libvirt.libvirtError:
                pass   # not running, transient, or gone already
    test = conn.defineXML(test_xml)
    if not test.isActive():
        test.create()


def agree(real: Side, fake: Side, steps) -> list[str]:
    """Run ``steps`` on both; the differences not in :data:`DIFFERENCES`."""
    problems = []
    for op, name, arg in steps:
        state = real.state_of(name)
        assert state == fake.state_of(name), (op, name, "states parted")
        may_differ = op in {key[0] for key in DIFFERENCES}
        marks = [len(side.settle()) for side in (real, fake)] \
            if may_differ else None
        got_real, got_fake = real.run(op, name, arg), fake.run(op, name, arg)
        if got_real == got_fake:
            continue
        if marks and DIFFERENCES.get((op, state, got_real[:3])) == got_fake:
            # A listed difference: its events are not compared either.
            for side, mark in zip((real, fake), marks, strict=True):
                side.settle()
                del side.events[mark:]
            continue
        problems.append(f"{op}({name}, {arg}) on a {state} domain: "
                        f"test:/// {got_real}, fakelibvirt {got_fake}")
    real_events, fake_events = real.settle(), fake.settle()
    if real_events != fake_events:
        problems.append(f"events: test:/// {real_events}, fakelibvirt "
                        f"{fake_events}")
    return problems


# -- hand-written: each call ----------------------------------------------------

SEQUENCES = {
    "define, look up, undefine": [
        ("define", "a", 0), ("lookup_uuid", "a", 0), ("id", "a", 0),
        ("info", "a", 0), ("state", "a", 0), ("is_active", "a", 0),
        ("is_persistent", "a", 0), ("xml_names", "a", 0),
        ("undefine", "a", 0), ("lookup_uuid", "a", 0), ("info", "a", 0)],
    "define twice": [("define", "a", 0), ("define", "a", 0),
                     ("create_xml", "a", 0)],
    "life cycle": [
        ("define", "a", 0), ("start", "a", 0), ("id", "a", 0),
        ("lookup_id", "a", 0), ("xml_names", "a", 0), ("state", "a", 0),
        ("suspend", "a", 0), ("state", "a", 0), ("resume", "a", 0),
        ("state", "a", 0), ("shutdown", "a", 0), ("state", "a", 0),
        ("start", "a", 0), ("destroy", "a", 0), ("state", "a", 0),
        ("id", "a", 0), ("destroy", "a", 0), ("undefine", "a", 0)],
    "transient": [
        ("create_xml", "b", 0), ("is_persistent", "b", 0),
        ("undefine", "b", 0), ("define", "b", 0), ("is_persistent", "b", 0),
        ("undefine", "b", 0), ("is_active", "b", 0), ("destroy", "b", 0),
        ("info", "b", 0)],
    "memory": [("create_xml", "c", 0), ("set_memory", "c", 262144),
               ("info", "c", 0), ("set_memory", "c", 10**9),
               ("destroy", "c", 0)],
    "inactive memory": [("define", "a", 0), ("set_memory", "a", 1024),
                        ("undefine", "a", 0)],
    "lists": [("define", "a", 0), ("create_xml", "b", 0),
              ("define", "c", 0), ("start", "c", 0), ("suspend", "c", 0),
              *[("list", "a", flags) for flags in LIST_FLAGS],
              ("list", "a", LIST_FLAGS[1] | LIST_FLAGS[4]),
              ("list", "a", LIST_FLAGS[3] | LIST_FLAGS[2])],
    "the driver's own answers (differences)": [
        ("define", "a", 0), ("shutdown", "a", 0), ("suspend", "a", 0),
        ("resume", "a", 0), ("start", "a", 0), ("start", "a", 0),
        ("resume", "a", 0), ("suspend", "a", 0), ("suspend", "a", 0),
        ("destroy", "a", 0)],
}


@pytest.mark.parametrize("steps", list(SEQUENCES.values()),
                         ids=list(SEQUENCES))
def test_hand_written_sequences_agree(sides, steps):
    real, fake = sides()
    assert agree(real, fake, steps) == []


def test_lookup_errors_agree(sides):
    real, fake = sides()
    for side_call in (lambda c: c.lookupByName("nope"),
                      lambda c: c.lookupByUUIDString(str(uuid.uuid4())),
                      lambda c: c.lookupByUUIDString("not-a-uuid"),
                      lambda c: c.lookupByID(999), lambda c: c.lookupByID(-1),
                      lambda c: c.defineXML("<domain"),
                      lambda c: c.defineXML("<notdomain/>"),
                      lambda c: c.defineXML("<domain type='test'/>")):
        answers = []
        for side in (real, fake):
            with pytest.raises(side.module.libvirtError) as raised:
                side_call(side.conn)
            domain = raised.value.get_error_domain()
            answers.append((raised.value.get_error_code(),
                            DRIVER_DOMAINS.get(domain, domain)))
        assert answers[0] == answers[1]


def test_uuid_clashes_and_stale_handles_agree(sides):
    """A uuid another name has, a running domain created again, and a
    handle kept after its domain is gone."""
    answers = []
    for side in sides():
        answers.append([side.run_call(call) for call in _clash_calls(
            side.conn, side.conn.defineXML(xml("a")))])
    assert answers[0] == answers[1]


def _clash_calls(conn, handle):
    clash = xml("a").replace(">a<", ">other<")
    return [lambda: conn.defineXML(clash),
            lambda: conn.createXML(clash, 0),
            handle.create,
            lambda: conn.createXML(xml("a"), 0),
            lambda: conn.defineXML(xml("a")),
            handle.undefine, handle.destroy, handle.destroy,
            handle.info, handle.undefine, handle.isActive,
            lambda: conn.lookupByUUIDString(UUIDS["a"].upper())]


def test_test_driver_refuses_what_fakelibvirt_does(sides):
    """The calls test:/// lacks, which fakelibvirt answers (listed in the
    doc): hostdev attach, node device detach, host memory stats."""
    real, _ = sides()
    dom = real.conn.lookupByName("test")
    hostdev = ("<hostdev mode='subsystem' type='pci' managed='yes'><source>"
               "<address domain='0' bus='0' slot='1' function='0'/></source>"
               "</hostdev>")
    device = real.conn.listAllDevices()[0]
    for call in (lambda: dom.attachDeviceFlags(hostdev, 0),
                 lambda: dom.detachDeviceFlags(hostdev, 0),
                 lambda: device.detachFlags(None, 0),
                 lambda: real.conn.getMemoryStats(-1)):
        with pytest.raises(libvirt.libvirtError) as raised:
            call()
        assert raised.value.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT


def test_every_difference_is_in_the_doc():
    text = DOC.read_text()
    missing = [p for p in DOC_PHRASES if p not in text]
    assert not missing


# -- generated ---------------------------------------------------------------

GENERATED = ("define", "create_xml", "start", "destroy", "shutdown",
             "suspend", "resume", "undefine", "lookup_uuid", "id", "info",
             "state", "is_active", "is_persistent", "list")
steps_strategy = st.lists(st.tuples(
    st.sampled_from(GENERATED), st.sampled_from(NAMES),
    st.sampled_from(LIST_FLAGS)), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps_strategy)
def test_generated_sequences_agree(sides, steps):
    real, fake = sides()
    assert agree(real, fake, steps) == []
