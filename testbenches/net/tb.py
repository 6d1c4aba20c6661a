"""What the network tests share: a node on a switch port is the host device's
(:class:`scripts.sim.devices.runtime.SwitchPort`), which the runtime and collective devices use too,
and so is the far side of any node's credit-flow link it is made of
(:class:`scripts.sim.devices.runtime.CreditLink`), which the network interface test plays."""

from scripts.sim.devices.runtime import CreditLink, SwitchPort

__all__ = ["CreditLink", "SwitchPort"]
