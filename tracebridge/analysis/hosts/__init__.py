"""Many hosts' runs at once: the engine that maps an analysis over hosts (in process or on Dask), and per-host summaries, group comparisons, advice and stragglers.
May import every other room of the analysis (summaries, comparisons and findings, host by host)."""

from .engine import HostInput, HostLoader, host_runner, map_hosts

__all__ = ["HostInput", "HostLoader", "host_runner", "map_hosts"]
