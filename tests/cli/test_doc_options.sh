#!/bin/bash
# test_doc_options.sh - the long options of each command agree between the
# README's synopsis ("## The command line"), `wpack CMD --help` and the
# command's parser, so a renamed, added or removed option cannot leave one
# of them stale:
#   - every command `wpack --help` lists has a synopsis in README.md, and
#     every synopsis names a command wpack has;
#   - every option `wpack CMD --help` defines (an option line, or its usage
#     line) is in CMD's README synopsis (the URL options --cache and
#     --cache-max: in README's "Archives on object stores" section instead);
#   - every option of CMD's README synopsis is in `wpack CMD --help`;
#   - CMD's parser accepts every option its help defines (no "unknown
#     option"), and refuses a bogus one (so that check can fail);
#   - every variable of wpack --help's Environment section is in README.md.
# WPACK_DOC_README overrides the README read (the test's own self-check).
. "$(dirname "$0")/lib.sh"

README=${WPACK_DOC_README:-$TESTS_DIR/../README.md}

"$WPACK" --help >"$T/help" 2>"$T/err" || fail help_runs "exit $?: $(head -c 300 "$T/err")"
cmds=$(sed -n '/^commands:/,/^$/p' "$T/help" | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
[ "$(echo $cmds | wc -w)" -ge 12 ] || fail commands_parsed "only: $cmds"
for c in $cmds; do
    "$WPACK" "$c" --help >"$T/help.$c" 2>&1 || fail "help_$c" "exit $?"
done

"$PY" - "$README" "$T" "$WPACK" $cmds >"$T/report" 2>&1 <<'EOF'
import os, re, subprocess, sys

readme_path, tdir, wpack, cmds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
readme = open(readme_path).read()
OPT = r"--[a-z][a-z0-9-]*"
URL_OPTS = {"--cache", "--cache-max"}
problems = []

# README: the first code block after "## The command line"; "wpack CMD ..."
# starts a command's synopsis, indented lines continue it.
m = re.search(r"^## The command line\n.*?^```\n(.*?)^```", readme, re.S | re.M)
synopsis = {}
if not m:
    problems.append("README: no synopsis block under '## The command line'")
else:
    cur = None
    for line in m.group(1).splitlines():
        w = re.match(r"wpack ([a-z]+)\b", line)
        if w:
            cur = w.group(1)
        elif not line.startswith(" "):
            cur = None
        if cur:
            synopsis.setdefault(cur, set()).update(re.findall(OPT + r"|(?<![\w-])-[a-zA-Z]\b", line))
sec = re.search(r"^## Archives on object stores\n(.*?)^## ", readme, re.S | re.M)
url_section = sec.group(1) if sec else ""

for c in cmds:
    if c not in synopsis:
        problems.append("%s: in wpack --help, no synopsis in README" % c)
for c in synopsis:
    if c not in cmds:
        problems.append("README synopsis of '%s': no such command in wpack --help" % c)

for c in cmds:
    text = open(os.path.join(tdir, "help." + c)).read()
    lines = text.splitlines()
    defined = set(re.findall(OPT, lines[0] if lines else ""))
    short = {}  # "--output": "-o", from "  -o, --output FILE"
    for line in lines[1:]:
        # an option line: indented 1 to 4 columns (descriptions wrap deeper)
        d = re.match(r" {1,4}(?:(-[a-zA-Z]), )?(%s)" % OPT, line)
        if d:
            defined.add(d.group(2))
            if d.group(1):
                short[d.group(2)] = d.group(1)
    defined.discard("--help")
    if len(defined) < 2:
        problems.append("%s: only %d options parsed from its --help" % (c, len(defined)))
    in_help = set(re.findall(OPT, text))
    syn = synopsis.get(c, set())
    for o in sorted(defined):
        if o in URL_OPTS:
            if not re.search(r"`%s\b" % re.escape(o), url_section):
                problems.append("%s %s: a URL option README's object-store section lacks" % (c, o))
        elif o not in syn and short.get(o) not in syn:
            problems.append("%s %s: in wpack %s --help, not in README's synopsis" % (c, o, c))
    in_help |= set(re.findall(r"(?<![\w-])-[a-zA-Z]\b", text))
    for o in sorted(syn - in_help):
        problems.append("%s %s: in README's synopsis, not in wpack %s --help" % (c, o, c))
    # the parser: each defined option known, a bogus one refused as unknown
    def unknown(o):
        r = subprocess.run([wpack, c, o, "x", "nonexistent.wpack"], cwd=tdir, timeout=60,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        return re.search(r"unknown option '?%s'?(\s|$)" % re.escape(o),
                         r.stderr.decode("utf-8", "replace")) is not None
    if not unknown("--no-such-option"):
        problems.append("%s: a bogus option is not refused as 'unknown option'" % c)
    for o in sorted(defined):
        if unknown(o):
            problems.append("%s %s: in its --help, refused as an unknown option" % (c, o))
    print("%s: %s" % (c, " ".join(sorted(defined))))

for p in problems:
    print("PROBLEM", p)
sys.exit(1 if problems else 0)
EOF
if [ $? -eq 0 ]; then
    pass doc_options_agree
else
    fail doc_options_agree "$(grep PROBLEM "$T/report" | head -c 2000)"
fi
grep -v '^PROBLEM' "$T/report" | head -c 3000

# Every variable of wpack --help's Environment section (test_help_env.sh
# keeps that list equal to the code's) is named in README.md too.
vars=$(sed -n '/^Environment/,$p' "$T/help" | grep -oE '\b([A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]|TMPDIR)\b' | sort -u)
missing=""
for v in $vars; do
    grep -qE "(^|[^A-Za-z0-9_])$v([^A-Za-z0-9_]|\$)" "$README" || missing="$missing $v"
done
if [ "$(echo $vars | wc -w)" -lt 20 ]; then
    fail doc_env_vars "only $(echo $vars | wc -w) variables found in wpack --help: $vars"
elif [ -n "$missing" ]; then
    fail doc_env_vars "in wpack --help, not in README.md:$missing"
else
    pass doc_env_vars
fi

finish
