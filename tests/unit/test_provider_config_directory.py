"""A directory of provider config files: which files, in which order, a
provider identified twice, collisions with the driver, change detection."""

from __future__ import annotations

import os

import pytest

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.provider_config import (
    ProviderConfigError, check_ownership, config_files, directory_signature,
    load_directory)

UUID = "5213b75d-9260-42a6-b236-f39b0fd10561"


def entry(ident, trait="CUSTOM_A", rc=None):
    text = f"  - identification: {ident}\n"
    text += f"    traits: {{additional: [{trait}]}}\n"
    if rc:
        text += f"    inventories: {{additional: [{{{rc}: {{total: 1}}}}]}}\n"
    return text


def write(directory, name, *entries):
    path = directory / name
    path.write_text("meta: {schema_version: '1.0'}\nproviders:\n"
                    + "".join(entries))
    return path


def test_yaml_and_yml_files_in_name_order_others_ignored(tmp_path):
    write(tmp_path, "b.yml", entry("{name: b}"))
    write(tmp_path, "a.yaml", entry("{name: a}"))
    write(tmp_path, ".hidden.yaml", entry("{name: hidden}"))
    write(tmp_path, "c.yaml.orig", entry("{name: orig}"))
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "d.yaml", entry("{name: d}"))
    config = load_directory(tmp_path)
    assert config.files == (str(tmp_path / "a.yaml"),
                            str(tmp_path / "b.yml"))
    assert [e.identification.name for e in config.entries] == ["a", "b"]
    assert config.directory == str(tmp_path) and config.warnings == ()


def test_missing_directory_is_marked_missing_with_a_warning(tmp_path):
    config = load_directory(tmp_path / "none")
    assert config.entries == () and config.files == ()
    assert config.missing
    assert config.warnings == (
        f"{tmp_path / 'none'}: no such directory; no provider config file "
        "is read, and what the files applied before stays until it exists "
        "(an empty directory removes it)",)


def test_an_empty_directory_is_not_missing(tmp_path):
    config = load_directory(tmp_path)
    assert not config.missing and config.warnings == ()


def test_a_file_instead_of_a_directory_is_refused(tmp_path):
    path = write(tmp_path, "a.yaml")
    with pytest.raises(ProviderConfigError, match="is not a directory; "
                       "point .compute. provider_config_location"):
        load_directory(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_unlistable_directory_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        with pytest.raises(ProviderConfigError, match="cannot list"):
            load_directory(locked)
        assert directory_signature(locked) is None
    finally:
        locked.chmod(0o700)


def test_one_bad_file_refuses_the_directory(tmp_path):
    write(tmp_path, "a.yaml", entry("{name: a}"))
    write(tmp_path, "b.yaml", entry("{name: b}", trait="NOT_CUSTOM"))
    with pytest.raises(ProviderConfigError) as info:
        load_directory(tmp_path)
    assert info.value.path == str(tmp_path / "b.yaml")


@pytest.mark.parametrize("first,second", [
    ("{name: cn1}", "{name: cn1}"),
    (f"{{uuid: {UUID}}}", f"{{uuid: {UUID.upper()}}}"),
    ("{uuid: $COMPUTE_NODE}", "{uuid: $COMPUTE_NODE}"),
])
def test_provider_identified_twice_within_a_file(tmp_path, first, second):
    path = write(tmp_path, "a.yaml", entry(first), entry(second, "CUSTOM_B"))
    with pytest.raises(ProviderConfigError) as info:
        load_directory(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}:5: providers[1]: ")
    assert f"is identified again (first at {path}:3 (providers[0]))" in (
        message)
    assert message.endswith("; merge the two entries into one")


def test_provider_identified_twice_across_files(tmp_path):
    a = write(tmp_path, "a.yaml", entry("{name: x}"), entry("{name: cn1}"))
    b = write(tmp_path, "b.yaml", entry("{name: cn1}", "CUSTOM_B"))
    with pytest.raises(ProviderConfigError) as info:
        load_directory(tmp_path)
    assert str(info.value).startswith(
        f"{b}:3: providers[0]: name 'cn1' is identified again (first at "
        f"{a}:5 (providers[1]))")


def test_empty_entries_do_not_count_as_a_second_identification(tmp_path):
    write(tmp_path, "a.yaml", entry("{name: cn1}"),
          "  - identification: {name: cn1}\n")
    config = load_directory(tmp_path)
    assert len(config.entries) == 1 and len(config.warnings) == 1


def test_trait_or_class_the_driver_owns_is_refused(tmp_path):
    path = write(tmp_path, "a.yaml", entry("{name: a}", "CUSTOM_OK"),
                 entry("{name: b}", "CUSTOM_DEV_VENDORID_10DE"))
    config = load_directory(tmp_path)
    ownership = Ownership(frozenset({"CUSTOM_RACK"}), ("CUSTOM_DEV_",))
    with pytest.raises(ProviderConfigError) as info:
        check_ownership(config, ownership)
    assert str(info.value) == (
        f"{path}:6: providers[1].traits: CUSTOM_DEV_VENDORID_10DE is owned "
        "by the driver (it sets and removes it itself); remove it from the "
        "file")
    check_ownership(config, Ownership(frozenset({"CUSTOM_RACK"})))

    write(tmp_path, "a.yaml", entry("{name: a}", rc="CUSTOM_BAREMETAL_GOLD"))
    with pytest.raises(ProviderConfigError) as info:
        check_ownership(load_directory(tmp_path), Ownership(),
                        owned_classes={"CUSTOM_BAREMETAL_GOLD"})
    assert str(info.value).startswith(
        f"{path}:5: providers[0].inventories: CUSTOM_BAREMETAL_GOLD is a "
        "resource class the driver reports itself; remove it")


def test_signature_changes_with_any_file_and_only_then(tmp_path):
    a = write(tmp_path, "a.yaml", entry("{name: a}"))
    first = directory_signature(tmp_path)
    assert first == directory_signature(tmp_path)
    (tmp_path / "notes.txt").write_text("x")  # not a config file
    assert directory_signature(tmp_path)[1] == first[1]
    b = write(tmp_path, "b.yaml", entry("{name: b}"))
    second = directory_signature(tmp_path)
    assert second[1] != first[1]
    replacement = tmp_path / ".a.yaml.new"
    replacement.write_text(a.read_text().replace("CUSTOM_A", "CUSTOM_C"))
    replacement.replace(a)  # how editors save
    third = directory_signature(tmp_path)
    assert third[1] != second[1]
    b.unlink()
    assert [p for p, _ in directory_signature(tmp_path)[1]] == [str(a)]
    assert directory_signature(tmp_path / "none") == (None, ())
    assert config_files(tmp_path / "none") == []
