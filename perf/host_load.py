"""Whether scripts/bench found the host busy, and whether the guest read
its clock the slow way, for both benchmark reports.

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


def slow_clock_warning(env):
    """The warning line to print when the guest's clock was not the TSC, or None."""
    source = env.get("clocksource", "")
    if not source or source == "tsc":
        return None
    return ("WARNING: the guest's clocksource was %s, not tsc: every clock reading was a"
            " system call, which costs ours (it times its spin) more than perftest; figures"
            " are not comparable with runs on the TSC (regress/README.md, \"The guest's clock\")"
            % source)
