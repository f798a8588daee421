#!/bin/bash
# test_help_env.sh - `wpack --help` lists every environment variable the CLI
# reads, so the list cannot drift from the code: each name passed to
# getenv() in cli/, or to one of cli/'s getenv wrappers (env, env_size,
# env_number), must appear in the help text as a whole word. A new wrapper
# (a getenv of a variable, not of a literal) fails the test until it is
# named in WRAPPERS below. Names read only by the test builds
# (#ifdef WPACK_TEST_HOOKS) are not the released CLI's and are skipped.
. "$(dirname "$0")/lib.sh"

CLI_DIR="$TESTS_DIR/../cli"

"$WPACK" --help >"$T/help" 2>"$T/err" || fail help_runs "exit $?: $(head -c 300 "$T/err")"

"$PY" - "$CLI_DIR" "$T/help" >"$T/report" 2>&1 <<'EOF'
import glob, os, re, sys

cli_dir, help_path = sys.argv[1], sys.argv[2]
help_text = open(help_path).read()
# The functions of cli/ that read the environment on their callers' behalf:
# file -> the wrappers defined there, and how many getenv(<variable>) calls
# they make between them (open_url.c: env reads a and b, env_number name).
WRAPPERS = {"open_url.c": (("env", "env_size", "env_number"), 3),
            "cli_env.c": (("env",), 1)}

def strip(src):
    # comments out, string and character literals kept ("http://" is no comment)
    tok = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*'
    src = re.sub(tok, lambda m: " " if m.group(0)[0] == "/" else m.group(0), src, flags=re.S)
    # test-build-only blocks (no #else in any of them)
    return re.sub(r"#ifdef WPACK_TEST_HOOKS.*?#endif", " ", src, flags=re.S)

names, problems = {}, []
for path in sorted(glob.glob(os.path.join(cli_dir, "*.[ch]"))):
    base = os.path.basename(path)
    src = strip(open(path).read())
    wrappers, n_indirect = WRAPPERS.get(base, ((), 0))
    indirect = re.findall(r"\bgetenv\s*\(\s*[A-Za-z_]\w*\s*\)", src)
    if len(indirect) != n_indirect:
        problems.append("%s: %d getenv() calls of a variable, expected %d: a new getenv "
                        "wrapper? name it in WRAPPERS" % (base, len(indirect), n_indirect))
    funcs = "|".join(("getenv",) + wrappers)
    for m in re.finditer(r"\b(?:%s)\s*\(([^;{}]*?)\)" % funcs, src):
        for lit in re.findall(r'"([^"\\]*)"', m.group(1)):
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", lit):
                names.setdefault(lit, base)
if len(names) < 20:
    problems.append("only %d names found: the parser missed the calls" % len(names))
for name, base in sorted(names.items()):
    if not re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(name), help_text):
        problems.append("%s (read in cli/%s) is not in wpack --help" % (name, base))
print("names:", " ".join(sorted(names)))
for p in problems:
    print("PROBLEM", p)
sys.exit(1 if problems else 0)
EOF
if [ $? -eq 0 ]; then
    pass help_lists_every_env_var
else
    fail help_lists_every_env_var "$(grep PROBLEM "$T/report" | head -c 1500)"
fi
cat "$T/report" | grep '^names:' | head -c 2000; echo

# The section is on stdout with the rest of the help (not only on a usage error).
if grep -q '^Environment' "$T/help"; then pass help_env_section; else fail help_env_section "no Environment heading"; fi

finish
