# Sourced by the guest tests that check which rdma-core providers a process
# mapped (transport/provider_preload.hpp: a process maps the provider of
# its own device and no other).

# mapped_providers: reads a process's mapped file paths, one per line, on
# stdin; prints the provider files among them, comma-separated by name.
# Some providers are symlinks (librxe's), and a mapping names the file a
# link leads to, so paths are matched against where each provider leads.
# None mapped prints an empty line and succeeds (under pipefail too).
mapped_providers() {
    local f providers
    providers=$(for f in /usr/lib/*/libibverbs/lib*-rdmav*.so; do readlink -f "$f"; done | sort -u)
    { grep -xF -f <(printf '%s\n' "$providers") || true; } | xargs -r -n1 basename | sort -u | paste -sd,
}

# rxe_provider_alone LIST: whether LIST (mapped_providers' output) is rxe's
# provider and nothing else; the comma test matters, since the glob alone
# also matches "librxe-rdmav34.so,libsiw-rdmav34.so".
rxe_provider_alone() {
    [[ "$1" == librxe-rdmav*.so && "$1" != *,* ]]
}
