# shellcheck shell=bash
# Sourced by the guest tests that check which rdma-core providers a process
# mapped (transport/provider_preload.hpp: a process maps the provider of
# its own device and no other).

# mapped_providers: reads a process's mapped file paths, one per line, on
# stdin; prints the providers among them by their names in libibverbs'
# directory, comma-separated (empty when none). Some providers are
# symlinks (mlx5's, for one) and a mapping names the file a link leads to,
# so each provider is known by where it leads. Fails, saying so, when no
# provider is installed to compare against.
mapped_providers() {
    local f table=()
    for f in /usr/lib/*/libibverbs/lib*-rdmav*.so; do
        [ -e "$f" ] && table+=("$(readlink -f "$f")"$'\t'"${f##*/}")
    done
    if [ ${#table[@]} -eq 0 ]; then
        echo "mapped_providers: no rdma-core provider under /usr/lib/*/libibverbs to compare against" >&2
        return 1
    fi
    awk -F'\t' 'NR == FNR { names[$1] = names[$1] " " $2; next }
                ($0 in names) { n = split(names[$0], each, " "); for (i = 1; i <= n; i++) print each[i] }' \
        <(printf '%s\n' "${table[@]}") - | sort -u | paste -sd,
}

# rxe_provider_alone LIST: whether LIST (mapped_providers' output) is rxe's
# provider and nothing else; the comma test matters, since the glob alone
# also matches "librxe-rdmav34.so,libsiw-rdmav34.so".
rxe_provider_alone() {
    [[ "$1" == librxe-rdmav*.so && "$1" != *,* ]]
}
