import pytest

from virtdriver.capabilities.traits.names import (
    MAX_TRAIT_LENGTH, CustomTraitNamer, TraitNameError, custom_trait,
    invalid_reason, validate_trait)


@pytest.mark.parametrize("namespace, value, expected", [
    ("DEV_VENDORID", "8086", "CUSTOM_DEV_VENDORID_8086"),
    ("dev vendorid", "10de", "CUSTOM_DEV_VENDORID_10DE"),
    ("CUSTOM_DEV_VENDORID", "10de", "CUSTOM_DEV_VENDORID_10DE"),
    ("custom_custom_x", "y", "CUSTOM_X_Y"),
    ("NET", "physnet-1.a", "CUSTOM_NET_PHYSNET_1_A"),
    ("NET", "custom_value", "CUSTOM_NET_CUSTOM_VALUE"),
    ("GPU", "Ünïcode ☃", "CUSTOM_GPU__N_CODE_"),
])
def test_custom_trait(namespace, value, expected):
    assert custom_trait(namespace, value) == expected
    assert invalid_reason(expected) is None


def test_long_values_are_shortened_deterministically_with_a_hash():
    long_a = "a" * 400
    long_b = "a" * 399 + "b"
    name_a = custom_trait("NS", long_a)
    name_b = custom_trait("NS", long_b)
    assert len(name_a) == MAX_TRAIT_LENGTH == len(name_b)
    assert name_a != name_b
    assert name_a == custom_trait("NS", long_a)
    assert name_a.startswith("CUSTOM_NS_AAAA")
    assert name_a[-9] == "_" and name_a[-8:].isalnum()


def test_empty_namespace_is_refused():
    with pytest.raises(TraitNameError, match="has no letters or digits"):
        custom_trait("--", "x")


def test_namer_reports_collisions_between_different_values():
    namer = CustomTraitNamer("DEV_VENDORID")
    assert namer.name("a-b") == "CUSTOM_DEV_VENDORID_A_B"
    assert namer.name("a-b") == "CUSTOM_DEV_VENDORID_A_B"  # same value: fine
    with pytest.raises(TraitNameError) as info:
        namer.name("a.b")
    assert "'a-b'" in str(info.value) and "'a.b'" in str(info.value)
    assert "CUSTOM_DEV_VENDORID_A_B" in str(info.value)
    assert namer.prefix == "CUSTOM_DEV_VENDORID_"


@pytest.mark.parametrize("name, reason", [
    ("HW_CPU_X86_AVX", None),
    ("CUSTOM_OK_1", None),
    ("CUSTOM_", "must match"),
    ("CUSTOM_lower", "must match"),
    ("CUSTOM_" + "X" * 300, "at most 255 characters, and it has 307"),
    ("HW_CPU_X86_NOT_A_THING", "neither an os-traits standard trait"),
])
def test_invalid_reason(name, reason):
    found = invalid_reason(name)
    if reason is None:
        assert found is None and validate_trait(name) == name
    else:
        assert reason in found
        with pytest.raises(TraitNameError, match=repr(name)[1:-1][:20]):
            validate_trait(name)
