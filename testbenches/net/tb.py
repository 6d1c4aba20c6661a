"""What the network tests share: a node on a switch port is the host device's
(:class:`scripts.sim.devices.runtime.SwitchPort`), which the runtime and collective devices use too."""

from scripts.sim.devices.runtime import SwitchPort

__all__ = ["SwitchPort"]
