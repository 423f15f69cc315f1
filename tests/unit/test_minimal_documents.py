"""Missing optional elements give empty values; units are normalised to KiB."""

from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.host import HostCapabilities, HostCPU


def test_bare_host_document_gives_empty_model():
    caps = parse_host_capabilities("<capabilities/>", "bare.xml")
    assert caps == HostCapabilities(source="bare.xml")
    assert caps.cpu == HostCPU() and caps.cpu_ids == frozenset()
    assert caps.cell(0) is None and caps.guest_arches == ()


def test_bare_domain_document_gives_unreported_everything():
    caps = parse_domain_capabilities("<domainCapabilities/>", "bare.xml")
    assert caps == DomainCapabilities(source="bare.xml")
    assert caps.devices.disk.reported is False
    assert caps.disk_buses == () and caps.tpm_models == ()


def test_unknown_elements_are_ignored():
    caps = parse_host_capabilities(
        "<capabilities><future/><host><uuid>u</uuid><warp drive='on'/>"
        "<cpu><arch>x86_64</arch><quantum/></cpu></host></capabilities>")
    assert caps.uuid == "u" and caps.cpu.arch == "x86_64"


def test_memory_units_are_normalised_to_kib():
    caps = parse_host_capabilities("""<capabilities><host><topology><cells>
      <cell id='0'><memory unit='GiB'>2</memory>
        <pages unit='MiB' size='2'>10</pages></cell>
      <cell id='1'><memory unit='bytes'>1048576</memory></cell>
      <cell id='2'><memory>512</memory></cell>
    </cells></topology></host></capabilities>""")
    assert [c.memory_kib for c in caps.cells] == [2 * 1024 * 1024, 1024, 512]
    assert caps.cells[0].pages[0].size_kib == 2048
    assert caps.cells[0].pages[0].count == 10


def test_disabled_device_hides_its_enum_values():
    caps = parse_domain_capabilities("""<domainCapabilities><devices>
      <disk supported='no'><enum name='bus'><value>virtio</value></enum></disk>
    </devices></domainCapabilities>""")
    assert caps.devices.disk.supported is False
    assert caps.devices.disk.values("bus") == ("virtio",)
    assert caps.disk_buses == ()


def test_distance_lookup():
    caps = parse_host_capabilities("""<capabilities><host><topology><cells>
      <cell id='0'><distances><sibling id='0' value='10'/>
        <sibling id='1' value='21'/></distances></cell>
    </cells></topology></host></capabilities>""")
    assert caps.cell(0).distance_to(1) == 21
    assert caps.cell(0).distance_to(7) is None
