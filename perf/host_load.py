"""Whether scripts/bench found the host busy, for both benchmark reports.

A busy host deschedules the guest's vCPUs (threads on the host), which makes
every figure of that run noisy, ratios included. scripts/bench records how
many of the host's cores were busy in the seconds before the run as
host_load_before=BUSY/CORES in the run's env.txt.
"""

BUSY_HOST_LOAD_PER_CORE = 0.5   # more than this share of the cores busy counts as a busy host


def busy_host(env):
    """(load, cores) when scripts/bench saw a busy host, else None."""
    try:
        load, cores = (float(x) for x in env.get("host_load_before", "").split("/"))
    except ValueError:
        return None
    return (load, int(cores)) if load > BUSY_HOST_LOAD_PER_CORE * cores else None


def busy_host_warning(env):
    """The warning line to print for a busy host, or None."""
    busy = busy_host(env)
    if not busy:
        return None
    return ("WARNING: the host was busy when the run started (%.2f of its %d cores busy): its"
            " guest vCPUs get descheduled, so figures and ratios are noisy; rerun on a quiet"
            " machine" % busy)
