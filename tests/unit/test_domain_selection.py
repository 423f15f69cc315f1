import logging

from virtdriver.capabilities import parse_host_capabilities
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.domain_selection import domain_keys
from virtdriver.capabilities.traits.model import DomainKey


def host(corpus_dir, name="caps-qemu-real-full.xml"):
    path = corpus_dir / "hostcaps" / name
    return parse_host_capabilities(path.read_bytes(), str(path))


def test_default_machine_of_the_host_arch(corpus_dir):
    assert domain_keys(host(corpus_dir), TraitConfig()) == (
        DomainKey("x86_64", "kvm"),)


def test_configured_machine_types_add_documents(corpus_dir):
    config = TraitConfig(machine_types=(("x86_64", "q35"),
                                        ("aarch64", "virt")),
                         virt_type="qemu")
    assert domain_keys(host(corpus_dir), config) == (
        DomainKey("x86_64", "qemu"), DomainKey("x86_64", "qemu", "q35"),
        DomainKey("aarch64", "qemu"), DomainKey("aarch64", "qemu", "virt"))


def test_arches_the_host_cannot_run_are_skipped_with_a_log(corpus_dir,
                                                          caplog):
    caplog.set_level(logging.DEBUG)
    config = TraitConfig(virt_type="kvm", machine_types=(("aarch64", "virt"),
                                                         ("mips9", "x")))
    keys = domain_keys(host(corpus_dir), config)
    assert keys == (DomainKey("x86_64", "kvm"),)  # aarch64 only under TCG
    assert "skipping arch mips9" in caplog.text
    assert "skipping arch aarch64" in caplog.text


def test_unset_virt_type_is_chosen_from_the_host(corpus_dir):
    tcg_only = host(corpus_dir, "caps.riscv64.xml")
    assert domain_keys(tcg_only, TraitConfig()) == (
        DomainKey("riscv64", "qemu"),)
