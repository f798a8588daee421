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

# 0. a directory where the MLIR goes: refused before anything is written
#    (the atomic path never replaces a non-regular file)
mkdir -p "$D/dir.mlir/sub"
before=$(names "$D")
expect_fail mlir_path_is_directory 'dir\.mlir: a directory, not a regular file: not replaced \[WPACK_E_FILE_TYPE\]' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/dir.mlir" --archive "$D/m.wpack"
cmp -s "$D/m.wpack" "$T/old.wpack" && [ "$(names "$D")" = "$before" ] && [ -d "$D/dir.mlir/sub" ] &&
    pass directory_refused_nothing_changed || fail directory_refused_nothing_changed "$(ls -la "$D")"
rm -rf "$D/dir.mlir"

# 1-3. the MLIR's rename fails after the archive's succeeded: an immutable
#    file at the MLIR's path (chattr +i: rename over it is EPERM, even for
#    root); the old archive comes back. Needs chattr on this file system.
echo old >"$D/imm.mlir"
if chattr +i "$D/imm.mlir" 2>/dev/null; then
    before=$(names "$D")
    expect_fail mlir_rename_fails 'imm\.mlir: cannot rename into place: Operation not permitted \[WPACK_E_IO\]' \
        "$WPACK" externalize "$T/b.mlir" -o "$D/imm.mlir" --archive "$D/m.wpack"
    cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_byte_for_byte ||
        fail old_archive_kept_byte_for_byte "$(ls -la "$D")"
    [ "$(names "$D")" = "$before" ] && pass no_temporaries_left ||
        fail no_temporaries_left "before: $before; after: $(names "$D")"
    [ "$(cat "$D/imm.mlir")" = old ] && pass mlir_path_untouched || fail mlir_path_untouched
    # the kept archive still opens and holds a.mlir's values
    "$WPACK" verify "$D/m.wpack" >/dev/null 2>&1 && pass old_archive_verifies || fail old_archive_verifies

    named_once mlir_rename_fails_named_once "imm.mlir"
    # through a symlink (followed: its target is replaced): the message
    # names the user's path and the target
    ln -s imm.mlir "$D/mlink.mlir"
    expect_fail mlir_rename_fails_link 'mlink\.mlir -> [^ ]*/imm\.mlir: cannot rename into place' \
        "$WPACK" externalize "$T/b.mlir" -o "$D/mlink.mlir" --archive "$D/m.wpack"
    named_once mlir_rename_fails_link_once "mlink.mlir"
    cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_link || fail old_archive_kept_link
    rm -f "$D/mlink.mlir"

    # 2. the same with no archive at the path before: none after
    expect_fail mlir_rename_fails_no_old 'imm\.mlir: cannot rename into place' \
        "$WPACK" externalize "$T/b.mlir" -o "$D/imm.mlir" --archive "$D/fresh.wpack"
    [ ! -e "$D/fresh.wpack" ] && pass no_archive_appears || fail no_archive_appears "$(ls -la "$D")"
    [ "$(names "$D")" = "$before" ] && pass no_temporaries_left_no_old ||
        fail no_temporaries_left_no_old "before: $before; after: $(names "$D")"

    # 3. the archive's path is a symlink: written through (its target
    #    replaced), and on the failure the target comes back, the link kept
    ln -s m.wpack "$D/link.wpack"
    before=$(names "$D")
    expect_fail mlir_rename_fails_symlink 'imm\.mlir: cannot rename into place' \
        "$WPACK" externalize "$T/b.mlir" -o "$D/imm.mlir" --archive "$D/link.wpack"
    [ -L "$D/link.wpack" ] && [ "$(readlink "$D/link.wpack")" = m.wpack ] && pass symlink_put_back ||
        fail symlink_put_back "$(ls -la "$D")"
    cmp -s "$D/m.wpack" "$T/old.wpack" && pass symlink_target_kept || fail symlink_target_kept
    [ "$(names "$D")" = "$before" ] && pass no_temporaries_left_symlink ||
        fail no_temporaries_left_symlink "before: $before; after: $(names "$D")"
    rm -f "$D/link.wpack"
    chattr -i "$D/imm.mlir"
else
    fail mlir_rename_fails "chattr +i is not supported under $T: cannot make a rename fail after the open"
fi
rm -f "$D/imm.mlir"

# 4. the MLIR cannot even be created (its directory does not exist): nothing
#    changes at either path
expect_fail mlir_dir_missing 'nodir/out\.mlir' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/nodir/out.mlir" --archive "$D/m.wpack"
cmp -s "$D/m.wpack" "$T/old.wpack" && pass old_archive_kept_early || fail old_archive_kept_early

# 4b. the archive cannot be created (its parent is a file): the message
#    names the archive once (the writer's message names it; externalize put
#    the path before it again)
echo x >"$D/afile"
expect_fail archive_parent_is_file 'afile/m\.wpack: cannot create a temporary file beside it' \
    "$WPACK" externalize "$T/b.mlir" -o "$D/out.mlir" --archive "$D/afile/m.wpack"
named_once archive_parent_is_file_named_once "afile/m.wpack"
cmp -s "$D/out.mlir" "$T/old.mlir" && pass old_mlir_kept_archive_fails || fail old_mlir_kept_archive_fails
rm -f "$D/afile"

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
