"""Models shared between parses (immutable, so sharing cannot show) are
equal to the ones the public constructors build, and the cache is bounded.
"""

from __future__ import annotations

from virtdriver.capabilities import (
    host_xml, parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.domain import (
    CustomCPUModes, HostModelCPU, SEVCaps, SGXCaps, Support)
from virtdriver.capabilities.host import GuestDomain


def _host(domains: str) -> bytes:
    return (f"<capabilities><guest><os_type>hvm</os_type>"
            f"<arch name='x86_64'>{domains}</arch></guest></capabilities>"
            ).encode()


def test_childless_domains_are_shared_and_equal_to_constructed_ones():
    one = parse_host_capabilities(_host("<domain type='kvm'/>"))
    two = parse_host_capabilities(_host("<domain type='kvm'/>"
                                        "<domain type='qemu'/>"))
    assert one.guests[0].domains == (GuestDomain("kvm"),)
    assert two.guests[0].domains == (GuestDomain("kvm"), GuestDomain("qemu"))
    assert one.guests[0].domains[0] is two.guests[0].domains[0]


def test_a_domain_with_children_is_its_own():
    caps = parse_host_capabilities(_host(
        "<domain type='kvm'><emulator>/usr/bin/kvm</emulator></domain>"))
    assert caps.guests[0].domains == (GuestDomain("kvm", "/usr/bin/kvm"),)


def test_made_up_domain_types_do_not_grow_the_cache_without_bound():
    types = [f"made-up-{i}" for i in range(200)]
    caps = parse_host_capabilities(_host("".join(
        f"<domain type='{t}'/>" for t in types)))
    assert caps.guests[0].domain_types == tuple(types)
    assert len(host_xml._PLAIN_DOMAINS) <= host_xml._MAX_PLAIN_DOMAINS


def test_flag_only_elements_read_as_constructed_models():
    caps = parse_domain_capabilities(
        b"<domainCapabilities><cpu><mode name='host-model' supported='no'/>"
        b"<mode name='custom' supported='yes'/></cpu>"
        b"<devices><disk supported='yes'/><tpm/></devices>"
        b"<features><gic supported='no'/><sev supported='no'/>"
        b"<sgx supported='yes'/></features></domainCapabilities>")
    assert caps.cpu.host_model == HostModelCPU(False)
    assert caps.cpu.custom == CustomCPUModes(True)
    assert caps.devices.disk == Support(True)
    assert caps.devices.tpm == Support(None) and not caps.devices.tpm.reported
    assert caps.features.gic == Support(False)
    assert caps.features.sev == SEVCaps(False)
    assert caps.features.sgx == SGXCaps(True)
    assert caps.devices.video == Support() and not caps.devices.video.reported
