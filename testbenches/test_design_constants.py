"""The one test that reads the RTL's constants: each equals the table the other tests take as expected.

Tests state register layouts, counter orders, error bits and latencies themselves, in the test or in
``golden/``. Here the RTL's own statement of each is held equal to that table, so a moved bit, a
reordered counter or an extra pipeline register fails here by name, as well as in the behavioural
tests that decode the outputs with the table.

One section per family; add a family's constants to its section.
"""

from amaranth.lib import wiring

# ------------------------------------------------------------------------------------------------
# collective: counter names and orders, the gradient tag's place, the damage bit
# (golden.collective.control)


def _counter_ports(component, width=16):
    """The names of ``component``'s ``width``-bit outputs, in port order."""
    return tuple(name for name, member in component.signature.members.items()
                 if member.is_port and member.flow == wiring.Out and member.shape == width)


def test_collective_counter_tables():
    import golden.collective.control as model
    import rtl.collective.fetch_slots as fetch_slots
    import rtl.collective.gcu as gcu
    import rtl.collective.reduction_table as reduction_table
    import rtl.collective.region_unit as region_unit

    assert fetch_slots.FETCH_COUNTERS == model.FETCH_COUNTERS
    assert reduction_table.COUNTERS == model.REDUCTION_COUNTERS
    assert gcu.GCU_COUNTERS == model.GCU_COUNTERS
    assert gcu.unit_counters() == model.UNIT_COUNTERS
    assert region_unit.REGION_COUNTERS == model.REGION_COUNTERS
    assert (1 << reduction_table.COUNTER_BITS) - 1 == model.COUNTER_MAX


def test_collective_counter_ports_in_table_order():
    import golden.collective.control as model
    from rtl.registry import get_block

    for block, table in (("gcu", model.UNIT_COUNTERS), ("gcu_cluster", model.UNIT_COUNTERS),
                         ("region_unit", model.REGION_COUNTERS)):
        ports = _counter_ports(get_block(block).build())
        assert tuple(port for port in ports if port in table) == table, block


def test_collective_tag_and_damage_bits():
    import golden.collective.control as model
    import rtl.collective.fetch_slots as fetch_slots
    import rtl.collective.tiered_cluster as tiered_cluster

    assert fetch_slots.CHUNK_FIELD_BITS == model.TAG_SHIFT
    assert tiered_cluster.DAMAGED_BIT == model.DAMAGED_BIT
