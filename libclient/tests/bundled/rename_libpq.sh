# Sourced by the tests of a program whose libpq is a private copy under
# another soname, as auditwheel makes a binary Python wheel's libpq.
# rename_libpq DIR PQ_FORMS BUNDLED_MODULE makes, in DIR:
#   lib/$RENAMED_LIBPQ   a copy of the libpq.so.5 PQ_FORMS loads, renamed
#   forms                PQ_FORMS, needing that copy instead of libpq.so.5
#   lib/module.so        BUNDLED_MODULE, the same (for bundled_loader)
# Needs patchelf.
RENAMED_LIBPQ=libpq-3c1b9e0a.so.5.15   # the shape of auditwheel's names

rename_libpq() {
    local dir=$1 forms=$2 module=$3 libpq
    command -v patchelf >/dev/null || { echo "patchelf is missing (scripts/lib/deps.sh, group build)"; return 1; }
    libpq=$(ldd "$forms" | awk '$1 == "libpq.so.5" { print $3 }')
    [ -f "$libpq" ] || { echo "$forms does not load libpq.so.5"; return 1; }
    mkdir -p "$dir/lib"
    cp "$libpq" "$dir/lib/$RENAMED_LIBPQ"
    patchelf --set-soname "$RENAMED_LIBPQ" "$dir/lib/$RENAMED_LIBPQ"
    cp "$forms" "$dir/forms"
    cp "$module" "$dir/lib/module.so"
    # One change per call: patchelf 0.14 drops --replace-needed when given
    # --set-rpath in the same call.
    for f in "$dir/forms" "$dir/lib/module.so"; do
        patchelf --replace-needed libpq.so.5 "$RENAMED_LIBPQ" "$f"
        patchelf --set-rpath "$dir/lib" "$f"
    done
}
