#!/bin/bash
# test_externalize_commit.sh - `wpack externalize` writes two files, the new
# archive and the MLIR naming it. When putting them in place fails, both
# paths keep what they held before: an existing archive stays byte for byte
# (also when the MLIR's rename fails after the archive's succeeded), no
# archive appears where there was none, no temporary is left behind, and the
# message names the path that failed.
. "$(dirname "$0")/lib.sh"

# two modules whose archives differ (the values differ)
gen() { # gen FILE FIRST: one f32 global of 64 elements FIRST, FIRST+1, ...
    "$PY" -c "
import sys
vals = ', '.join(str(float(i + int(sys.argv[2]))) for i in range(64))
open(sys.argv[1], 'w').write('module {\n  ml_program.global private @w(dense<[%s]> : tensor<64xf32>) : tensor<64xf32>\n}\n' % vals)
" "$1" "$2"
}
gen "$T/a.mlir" 0
gen "$T/b.mlir" 100
D="$T/d"
mkdir -p "$D"

# listing of a directory (names only), to see that nothing was left behind
names() { (cd "$1" && ls -A | sort | tr '\n' ' '); }

# the old archive and MLIR, from a.mlir
expect first "$WPACK" externalize "$T/a.mlir" -o "$D/out.mlir" --archive "$D/m.wpack"
cp "$D/m.wpack" "$T/old.wpack"
cp "$D/out.mlir" "$T/old.mlir"
before=$(names "$D")

# 1. the MLIR's rename fails (its path is a directory) after the archive was
#    renamed: the old archive comes back
mkdir -p "$D/dir.mlir/sub"
before=$(names "$D")
expect_fail mlir_rename_fails 'dir\.mlir: cannot rename into place: Is a directory \[WPACK_E_IO\]' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/dir.mlir" --archive "$D/m.wpack"
cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_byte_for_byte ||
    fail old_archive_kept_byte_for_byte "$(ls -la "$D")"
[ "$(names "$D")" = "$before" ] && pass no_temporaries_left ||
    fail no_temporaries_left "before: $before; after: $(names "$D")"
[ -d "$D/dir.mlir/sub" ] && pass mlir_path_untouched || fail mlir_path_untouched
# the kept archive still opens and holds a.mlir's values
"$WPACK" verify "$D/m.wpack" >/dev/null 2>&1 && pass old_archive_verifies || fail old_archive_verifies

# 2. the same with no archive at the path before: none after
expect_fail mlir_rename_fails_no_old 'dir\.mlir: cannot rename into place' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/dir.mlir" --archive "$D/fresh.wpack"
[ ! -e "$D/fresh.wpack" ] && pass no_archive_appears || fail no_archive_appears "$(ls -la "$D")"
[ "$(names "$D")" = "$before" ] && pass no_temporaries_left_no_old ||
    fail no_temporaries_left_no_old "before: $before; after: $(names "$D")"

# 3. the archive's path is a symlink: it is put back as the symlink
ln -s m.wpack "$D/link.wpack"
before=$(names "$D")
expect_fail mlir_rename_fails_symlink 'dir\.mlir: cannot rename into place' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/dir.mlir" --archive "$D/link.wpack"
[ -L "$D/link.wpack" ] && [ "$(readlink "$D/link.wpack")" = m.wpack ] && pass symlink_put_back ||
    fail symlink_put_back "$(ls -la "$D")"
cmp -s "$D/m.wpack" "$T/old.wpack" && pass symlink_target_kept || fail symlink_target_kept
[ "$(names "$D")" = "$before" ] && pass no_temporaries_left_symlink ||
    fail no_temporaries_left_symlink "before: $before; after: $(names "$D")"
rm -f "$D/link.wpack"

# 4. the MLIR cannot even be created (its directory does not exist): nothing
#    changes at either path
expect_fail mlir_dir_missing 'nodir/out\.mlir' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/nodir/out.mlir" --archive "$D/m.wpack"
cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_early || fail old_archive_kept_early

# 5. a read-only directory for the MLIR (root writes anyway: skipped then)
if [ "$(id -u)" != 0 ]; then
    mkdir -p "$T/ro" && chmod 555 "$T/ro"
    expect_fail mlir_dir_read_only 'ro/out\.mlir' \
        "$WPACK" externalize "$T/b.mlir" -o "$T/ro/out.mlir" --archive "$D/m.wpack"
    cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_read_only || fail old_archive_kept_read_only
    chmod 755 "$T/ro"
else
    echo "skip mlir_dir_read_only: running as root, a read-only directory does not stop writes"
fi

# 6. success replaces both, leaves no temporary, and the MLIR names the new archive
before=$(names "$D")
expect replace_both "$WPACK" externalize "$T/b.mlir" -o "$D/out.mlir" --archive "$D/m.wpack"
cmp -s "$D/m.wpack" "$T/old.wpack" && fail archive_replaced "still the old bytes" || pass archive_replaced
[ "$(names "$D")" = "$before" ] && pass no_temporaries_after_success ||
    fail no_temporaries_after_success "before: $before; after: $(names "$D")"
expect resolve_new_pair "$WPACK" resolve -q "$D/m.wpack" "$D/out.mlir" -o "$T/back.mlir" --strict

finish
