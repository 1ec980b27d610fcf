"""Runners: the generic padded forward, and the packed (varlen, no padding) forward of the native families."""
