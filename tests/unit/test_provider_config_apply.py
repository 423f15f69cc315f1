"""Planning provider config files onto a tree: who gets what, deletion
removes, only what virtdriver added is ever removed, collisions refused,
and an edited record can do no more than the docs promise."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.provider_config import (
    Applied, AppliedRecord, ProviderConfigError, ProviderRecord, apply_plan,
    load_directory, plan, reported_classes, unmatched)
from virtdriver.providers.inventory import Inventory
from virtdriver.resource_tracker.provider_tree import ProviderTree

CN1 = "c0000000-0000-4000-8000-000000000001"
CN2 = "c0000000-0000-4000-8000-000000000002"
HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"
DEFAULT = ("  - identification: {uuid: $COMPUTE_NODE}\n"
           "    traits: {additional: [CUSTOM_RACK_7]}\n")


def make_tree():
    """Two compute nodes with a NUMA child each, and a root that is not a
    compute node (another service's)."""
    tree = ProviderTree()
    for name, uuid in (("cn1", CN1), ("cn2", CN2)):
        tree.new_root(name, uuid)
        tree.update_traits(name, [os_traits.COMPUTE_NODE])
        tree.update_inventory(name, {orc.VCPU: {"total": 8}})
        tree.new_child(f"{name}_NUMA0", name)
    tree.new_root("shared-storage")
    return tree


class Cycles:
    """A tree, a config directory and a record, cycle after cycle — what
    the tracker does after the driver's update."""

    def __init__(self, tmp_path, tree=None):
        self.dir = tmp_path / "provider_config"
        self.dir.mkdir()
        self.tree = tree or make_tree()
        self.record = AppliedRecord()

    def write(self, name, *entries):
        path = self.dir / name
        path.write_text(HEAD + "".join(entries))
        return path

    def cycle(self, **kwargs):
        before = self.tree.to_json()
        done = plan(load_directory(self.dir), self.tree.snapshot(),
                    self.record, **kwargs)
        assert self.tree.to_json() == before   # planning changes nothing
        apply_plan(self.tree, done)
        self.record = done.record
        return done

    def traits(self, name):
        return {t for t in self.tree.record(name).traits
                if t.startswith("CUSTOM_")}

    def inventory(self, name):
        return dict(self.tree.record(name).inventory)


def entry(ident, traits=(), inventories=None):
    text = f"  - identification: {ident}\n"
    if traits:
        text += f"    traits: {{additional: [{', '.join(traits)}]}}\n"
    if inventories:
        items = ", ".join(f"{{{rc}: {record}}}"
                          for rc, record in inventories.items())
        text += f"    inventories: {{additional: [{items}]}}\n"
    return text


def test_compute_node_means_every_compute_node_root_only(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT)
    done = run.cycle()
    assert set(done.changes) == {CN1, CN2}
    assert run.traits("cn1") == run.traits("cn2") == {"CUSTOM_RACK_7"}
    assert run.traits("cn1_NUMA0") == set()
    assert run.traits("shared-storage") == set()    # not a compute node


def test_compute_nodes_argument_says_which_roots(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT)
    run.cycle(compute_nodes=[CN2])
    assert run.traits("cn1") == set() and run.traits("cn2") == {
        "CUSTOM_RACK_7"}


def test_name_and_uuid_reach_roots_and_children(tmp_path):
    run = Cycles(tmp_path)
    numa = run.tree.record("cn2_NUMA0").uuid
    run.write("a.yaml", entry("{name: cn1_NUMA0}", ["CUSTOM_FPGA_HOST"]),
              entry(f"{{uuid: {numa.upper()}}}", ["CUSTOM_B"]),
              entry("{name: shared-storage}", ["CUSTOM_SSD"]))
    run.cycle()
    assert run.traits("cn1_NUMA0") == {"CUSTOM_FPGA_HOST"}
    assert run.traits("cn2_NUMA0") == {"CUSTOM_B"}
    assert run.traits("shared-storage") == {"CUSTOM_SSD"}


def test_explicit_entry_replaces_compute_node_entry_for_that_root(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT)
    run.cycle()
    # cn1 gets its own entry: the default's trait leaves cn1 only.
    run.write("b.yaml", entry("{name: cn1}", ["CUSTOM_GOLD"]))
    done = run.cycle()
    assert run.traits("cn1") == {"CUSTOM_GOLD"}
    assert run.traits("cn2") == {"CUSTOM_RACK_7"}
    assert done.changes[CN1].remove_traits == {"CUSTOM_RACK_7"}
    assert CN2 not in done.changes


def test_same_provider_by_name_and_by_uuid_is_refused(tmp_path):
    run = Cycles(tmp_path)
    a = run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A"]))
    b = run.write("b.yaml", entry(f"{{uuid: {CN1}}}", ["CUSTOM_B"]))
    with pytest.raises(ProviderConfigError) as info:
        run.cycle()
    assert str(info.value) == (
        f"{b}:3: providers[0]: uuid '{CN1}' is provider 'cn1' ({CN1}), "
        f"which name 'cn1' at {a}:3 (providers[0]) identifies too; keep one "
        "entry for the provider")
    assert run.traits("cn1") == set()


def test_entry_matching_nothing_is_a_warning(tmp_path):
    run = Cycles(tmp_path)
    path = run.write("a.yaml", entry("{name: cn9}", ["CUSTOM_A"]))
    done = run.cycle()
    assert done.empty and len(done.record) == 0
    assert done.warnings == (f"{path}:3 (providers[0]): name 'cn9' matches "
                             "no provider in the tree; ignored until one "
                             "appears",)


def test_deleting_a_trait_an_entry_or_a_file_removes_it(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A", "CUSTOM_B"],
                              {"CUSTOM_X": "{total: 4}"}))
    run.write("b.yaml", entry("{name: cn2}", ["CUSTOM_C"]))
    run.cycle()
    assert run.traits("cn1") == {"CUSTOM_A", "CUSTOM_B"}
    assert run.inventory("cn1")["CUSTOM_X"] == Inventory(4)

    run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A"],
                              {"CUSTOM_X": "{total: 4}"}))
    done = run.cycle()
    assert run.traits("cn1") == {"CUSTOM_A"}
    assert done.changes[CN1].remove_traits == {"CUSTOM_B"}

    run.write("a.yaml", entry("{name: cn2_NUMA0}", ["CUSTOM_Z"]))
    run.cycle()
    assert run.traits("cn1") == set()
    assert set(run.inventory("cn1")) == {orc.VCPU}  # the driver's stays
    assert run.traits("cn2") == {"CUSTOM_C"}

    (run.dir / "b.yaml").unlink()
    (run.dir / "a.yaml").unlink()
    done = run.cycle()
    assert run.traits("cn2") == set() and run.traits("cn2_NUMA0") == set()
    assert len(done.record) == 0


def test_removing_the_whole_directory_removes_what_it_applied(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT)
    run.cycle()
    (run.dir / "a.yaml").unlink()
    run.dir.rmdir()
    done = run.cycle()
    assert run.traits("cn1") == run.traits("cn2") == set()
    assert len(done.record) == 0


def test_a_second_cycle_changes_nothing(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT, entry("{name: cn1_NUMA0}", ["CUSTOM_F"],
                                       {"CUSTOM_X": "{total: 2}"}))
    first = run.cycle()
    second = run.cycle()
    assert not first.empty and second.empty
    assert second.record == first.record


def test_what_was_there_before_a_file_named_it_is_never_removed(tmp_path):
    run = Cycles(tmp_path)
    run.tree.add_traits("cn1", "CUSTOM_BY_HAND")
    path = run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_BY_HAND",
                                                      "CUSTOM_NEW"]))
    run.cycle()
    applied = run.record.provider(CN1).traits
    assert applied["CUSTOM_BY_HAND"].added is False
    assert applied["CUSTOM_NEW"].added is True
    # Still not removed after another cycle made the record again.
    run.cycle()
    (run.dir / "a.yaml").unlink()
    done = run.cycle()
    assert run.traits("cn1") == {"CUSTOM_BY_HAND"}
    assert done.kept == (
        f"provider 'cn1' ({CN1}): CUSTOM_BY_HAND stays: it was there before "
        f"a provider config file named it ({path}:4 (providers[0])); remove "
        "it by hand if unwanted",)


def test_trait_someone_removed_is_put_back_and_then_is_ours(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A"]))
    run.cycle()
    run.tree.remove_traits("cn1", "CUSTOM_A")
    done = run.cycle()
    assert done.changes[CN1].add_traits == {"CUSTOM_A"}
    assert run.record.provider(CN1).traits["CUSTOM_A"].added


def test_inventory_set_changed_and_removed(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_X": "{total: 4, reserved: 1}"}))
    run.cycle()
    assert run.inventory("cn1_NUMA0") == {"CUSTOM_X": Inventory(4, 1)}
    run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_X": "{total: 8}"}))
    done = run.cycle()
    assert done.changes[run.tree.record("cn1_NUMA0").uuid].set_inventories == {
        "CUSTOM_X": Inventory(8)}
    assert run.inventory("cn1_NUMA0") == {"CUSTOM_X": Inventory(8)}
    run.write("a.yaml")
    run.cycle()
    assert run.inventory("cn1_NUMA0") == {}


def test_inventory_the_driver_rewrites_each_cycle_is_set_again(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1}", inventories={
        "CUSTOM_X": "{total: 4}"}))
    run.cycle()
    assert set(run.inventory("cn1")) == {orc.VCPU, "CUSTOM_X"}
    run.tree.update_inventory("cn1", {orc.VCPU: {"total": 8}})  # driver
    run.cycle()
    assert set(run.inventory("cn1")) == {orc.VCPU, "CUSTOM_X"}
    run.tree.update_inventory("cn1", {orc.VCPU: {"total": 8}})
    run.write("a.yaml")
    done = run.cycle()
    assert done.empty and set(run.inventory("cn1")) == {orc.VCPU}
    assert len(done.record) == 0


def test_someone_elses_inventory_is_refused_unless_identical(tmp_path):
    run = Cycles(tmp_path)
    run.tree.update_inventory("cn1_NUMA0", {"CUSTOM_X": {"total": 2}})
    path = run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_X": "{total: 4}"}))
    with pytest.raises(ProviderConfigError) as info:
        run.cycle()
    numa = run.tree.record("cn1_NUMA0")
    assert str(info.value) == (
        f"{path}:4: providers[0].inventories: CUSTOM_X is already on "
        f"{numa.label} with other values, set by someone else (the driver "
        "or another agent); remove it from the file, or from whatever else "
        "sets it")
    # The same values: nothing to change, and never removed later.
    run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_X": "{total: 2}"}))
    assert run.cycle().empty
    assert run.record.provider(numa.uuid).inventories["CUSTOM_X"].added \
        is False
    run.write("a.yaml")
    done = run.cycle()
    assert run.inventory("cn1_NUMA0") == {"CUSTOM_X": Inventory(2)}
    assert "CUSTOM_X stays: it was there before" in done.kept[0]


def test_inventory_whose_values_changed_since_is_left(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_X": "{total: 4}"}))
    run.cycle()
    run.tree.update_inventory("cn1_NUMA0", {"CUSTOM_X": {"total": 3}})
    run.write("a.yaml")
    done = run.cycle()
    assert run.inventory("cn1_NUMA0") == {"CUSTOM_X": Inventory(3)}
    assert "its values changed since virtdriver set them" in done.kept[0]


def test_driver_owned_trait_and_class_refused_per_provider(tmp_path):
    run = Cycles(tmp_path)
    path = run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_RACK"]))
    owned = Ownership(frozenset({"CUSTOM_RACK"}))
    with pytest.raises(ProviderConfigError) as info:
        run.cycle(ownership=owned)
    assert str(info.value) == (
        f"{path}:4: providers[0].traits: CUSTOM_RACK is owned by the driver "
        f"on provider 'cn1' ({CN1}) (it sets and removes it itself); remove "
        "it from the file")
    # Planning another node's providers does not see cn1's entry.
    run.cycle(ownership=owned, scope=run.tree.get_provider_uuids("cn2"))
    run.write("a.yaml", entry("{name: cn1}", inventories={
        "CUSTOM_BAREMETAL_GOLD": "{total: 1}"}))
    with pytest.raises(ProviderConfigError, match="CUSTOM_BAREMETAL_GOLD is "
                       "a resource class the driver reports on provider"):
        run.cycle(owned_classes={"CUSTOM_BAREMETAL_GOLD"})


def test_trait_the_driver_came_to_own_is_left_to_the_driver(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A"]))
    run.cycle()
    run.write("a.yaml")
    done = run.cycle(ownership=Ownership(frozenset({"CUSTOM_A"})))
    assert run.traits("cn1") == {"CUSTOM_A"}
    assert done.kept[0].endswith("CUSTOM_A stays: the driver owns this "
                                 "trait now")
    assert len(done.record) == 0


def test_scope_plans_one_node_and_keeps_the_others_record(tmp_path):
    run = Cycles(tmp_path)
    run.write("a.yaml", DEFAULT)
    run.cycle()
    run.write("a.yaml")
    done = run.cycle(scope=run.tree.get_provider_uuids_in_tree("cn1"),
                     compute_nodes=[CN1])
    assert run.traits("cn1") == set()
    assert run.traits("cn2") == {"CUSTOM_RACK_7"}
    assert set(done.record) == {CN2}


def test_provenance_follows_the_lines(tmp_path):
    run = Cycles(tmp_path)
    path = run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_A"]))
    run.cycle()
    assert run.record.trait_source(CN1, "CUSTOM_A").source.line == 4
    run.write("a.yaml", entry("{name: cn2}", ["CUSTOM_B"]),
              "  - identification: {name: cn1}\n"
              "    traits:\n      additional:\n        - CUSTOM_C\n"
              "        - CUSTOM_A\n")
    run.cycle()
    source = run.record.trait_source(CN1, "CUSTOM_A")
    assert (source.path, source.line, source.entry) == (str(path), 9, 1)
    assert run.record.trait_source(CN1, "CUSTOM_C").line == 8
    assert run.record.trait_source(CN1, "CUSTOM_B") is None
    assert run.record.trait_source(CN2, "CUSTOM_B").line == 4


# -- an edited record ---------------------------------------------------------

def forged(uuid, traits=(), inventories=None, added=True):
    return AppliedRecord({uuid: ProviderRecord(
        {t: Applied("/forged.yaml", 1, 0, added) for t in traits},
        {rc: Applied("/forged.yaml", 1, 0, added, record)
         for rc, record in (inventories or {}).items()})})


def test_edited_record_removes_only_custom_unlisted_unowned_names(tmp_path):
    run = Cycles(tmp_path)
    run.tree.add_traits("cn1", "CUSTOM_OPERATOR", "CUSTOM_LISTED",
                        "CUSTOM_DRIVER", os_traits.HW_CPU_X86_AVX2)
    run.tree.add_traits("cn2", "CUSTOM_OPERATOR")
    run.write("a.yaml", entry("{name: cn1}", ["CUSTOM_LISTED"]))
    run.record = forged(CN1, ["CUSTOM_OPERATOR", "CUSTOM_LISTED",
                              "CUSTOM_DRIVER", "CUSTOM_ABSENT",
                              os_traits.HW_CPU_X86_AVX2,
                              os_traits.COMPUTE_NODE])
    done = run.cycle(ownership=Ownership(frozenset({"CUSTOM_DRIVER"})))
    cn1 = run.tree.record("cn1").traits
    # The one thing an edit can do: an unlisted CUSTOM_ trait, on the
    # provider the record names, that the provider has.
    assert done.changes[CN1].remove_traits == {"CUSTOM_OPERATOR"}
    assert {"CUSTOM_LISTED", "CUSTOM_DRIVER", os_traits.HW_CPU_X86_AVX2,
            os_traits.COMPUTE_NODE} <= cn1
    assert "CUSTOM_OPERATOR" in run.tree.record("cn2").traits
    assert set(done.record.provider(CN1).traits) == {"CUSTOM_LISTED"}
    reasons = "\n".join(done.kept)
    assert "not a CUSTOM_ name (an edited record?)" in reasons
    assert "the driver owns this trait now" in reasons


def test_edited_record_cannot_remove_what_it_says_was_not_added(tmp_path):
    run = Cycles(tmp_path)
    run.tree.add_traits("cn1", "CUSTOM_OPERATOR")
    run.record = forged(CN1, ["CUSTOM_OPERATOR"], added=False)
    run.cycle()
    assert run.traits("cn1") == {"CUSTOM_OPERATOR"}


def test_edited_record_cannot_remove_a_standard_class_or_other_values(
        tmp_path):
    run = Cycles(tmp_path)
    run.tree.update_inventory("cn1_NUMA0", {"CUSTOM_X": {"total": 2}})
    numa = run.tree.record("cn1_NUMA0").uuid
    run.record = forged(CN1, inventories={orc.VCPU: Inventory(8)}).updated(
        forged(numa, inventories={"CUSTOM_X": Inventory(3)}))
    done = run.cycle()
    assert done.empty
    assert run.inventory("cn1") == {orc.VCPU: Inventory(8)}
    assert run.inventory("cn1_NUMA0") == {"CUSTOM_X": Inventory(2)}


def test_record_of_providers_not_in_the_tree_is_kept_untouched(tmp_path):
    run = Cycles(tmp_path)
    other = "c0000000-0000-4000-8000-00000000000f"
    run.record = forged(other, ["CUSTOM_A"])
    done = run.cycle()
    assert done.empty and done.record == run.record == forged(
        other, ["CUSTOM_A"])


def test_reported_classes_are_what_the_files_did_not_apply(tmp_path):
    run = Cycles(tmp_path)
    numa = run.tree.record("cn1_NUMA0").uuid
    run.tree.update_inventory(numa, {"CUSTOM_DRIVER": {"total": 1}})
    run.write("a.yaml", entry("{name: cn1_NUMA0}", inventories={
        "CUSTOM_FILE": "{total: 2}"}))
    run.cycle()
    scope = run.tree.get_provider_uuids_in_tree("cn1")
    assert reported_classes(run.tree, scope, run.record) == {
        orc.VCPU, "CUSTOM_DRIVER"}
    assert reported_classes(run.tree, scope, AppliedRecord()) == {
        orc.VCPU, "CUSTOM_DRIVER", "CUSTOM_FILE"}


def test_scoped_plans_leave_unmatched_entries_to_unmatched(tmp_path):
    run = Cycles(tmp_path)
    path = run.write("a.yaml", entry("{name: cn9}", ["CUSTOM_A"]),
                     entry("{name: cn1}", ["CUSTOM_B"]))
    done = run.cycle(scope=run.tree.get_provider_uuids_in_tree("cn1"))
    assert done.warnings == () and run.traits("cn1") == {"CUSTOM_B"}
    assert unmatched(load_directory(run.dir), run.tree) == [
        f"{path}:3 (providers[0]): name 'cn9' matches no provider in the "
        "tree; ignored until one appears"]


def test_hold_puts_back_what_the_record_lists_on_a_tree_built_afresh(
        tmp_path):
    """The files cannot be used (refused, directory missing): a fresh tree
    gets back what the record lists — nothing more, nothing removed, the
    record unchanged — and never a name the driver owns or a class it
    reports."""
    from virtdriver.provider_config import hold

    cycles = Cycles(tmp_path)
    cycles.write("site.yaml", entry(
        "{name: cn1}", ["CUSTOM_RACK_7", "CUSTOM_OWNED_NOW"],
        {"CUSTOM_FPGA": "{total: 2}", "CUSTOM_REPORTED": "{total: 1}"}))
    cycles.cycle()
    fresh = make_tree()
    fresh.update_traits("cn1", [os_traits.COMPUTE_NODE, "CUSTOM_FOREIGN"])
    fresh.update_inventory("cn1", {orc.VCPU: {"total": 8},
                                   "CUSTOM_REPORTED": {"total": 5}})
    scope = fresh.get_provider_uuids_in_tree("cn1")

    kept = hold(fresh.snapshot(), cycles.record, scope,
                ownership=Ownership(frozenset({"CUSTOM_OWNED_NOW"})),
                owned_classes=reported_classes(fresh, scope, cycles.record))
    apply_plan(fresh, kept)

    assert kept.record is cycles.record
    assert {t for t in fresh.data("cn1").traits if t.startswith("CUSTOM_")
            } == {"CUSTOM_RACK_7", "CUSTOM_FOREIGN"}
    inventory = fresh.record("cn1").inventory
    assert inventory["CUSTOM_FPGA"].total == 2
    assert inventory["CUSTOM_REPORTED"].total == 5       # the driver's
    assert hold(fresh.snapshot(), cycles.record, scope,
                ownership=Ownership(frozenset({"CUSTOM_OWNED_NOW"})),
                owned_classes={"CUSTOM_REPORTED"}).empty
