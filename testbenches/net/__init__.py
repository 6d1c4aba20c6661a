"""Tests of rtl/net: the network interface and the switch."""
