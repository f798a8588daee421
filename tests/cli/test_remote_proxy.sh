#!/bin/bash
# test_remote_proxy.sh - remote archives through an HTTP proxy (a second
# nginx on loopback, forwarding to the first): the CLI and the Python
# package read the proxy variables as curl does and pass them to the
# library (the `proxy` / `no_proxy` options); the library itself reads
# none and keeps libcurl from reading them. Through the proxy, the URL's
# host name is the proxy's to look up (.invalid never resolves here).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/remote_lib.sh"

serve_small_archive

# the proxy: every request it is sent ("GET http://HOST/PATH HTTP/1.1"),
# logged, then passed to the nginx above
mkdir -p "$T/proxy"
PROXY_PORT=$(free_port)
nginx_conf "$T/proxy" "
    log_format req '\$request \$status';
    access_log $T/proxy/access.log req;
    server {
        listen 127.0.0.1:$PROXY_PORT;
        location / { proxy_pass http://127.0.0.1:$NGINX_PORT; }
    }"
if ! run_nginx "$(command -v nginx || echo /usr/sbin/nginx)" "$T/proxy" "$PROXY_PORT"; then
    fail proxy_started "$(head -c 300 "$T/proxy/error.log")"
    finish
    exit 1
fi
pass proxy_started
P="http://127.0.0.1:$PROXY_PORT"
D="http://127.0.0.1:$NGINX_PORT/a.wpack"
FAR="http://weights.invalid/a.wpack"
export WPACK_REMOTE_RETRIES=0
unset http_proxy https_proxy all_proxy HTTPS_PROXY ALL_PROXY HTTP_PROXY no_proxy NO_PROXY

proxied() { wc -l <"$T/proxy/access.log" 2>/dev/null || echo 0; }

# through_proxy NAME CMD...: CMD exits 0 and the proxy saw requests for
# weights.invalid
through_proxy() {
    local name=$1; shift
    local before; before=$(proxied)
    if "$@" >"$T/out" 2>"$T/err"; then
        if [ "$(proxied)" -gt "$before" ] && grep -q "GET http://weights.invalid/a.wpack" "$T/proxy/access.log"; then
            pass "$name"
        else
            fail "$name" "the proxy saw nothing"
        fi
    else
        fail "$name" "exit $?: $(head -c 400 "$T/err")"
    fi
}

# direct NAME CMD...: CMD exits 0 and the proxy saw nothing
direct() {
    local name=$1; shift
    local before; before=$(proxied)
    if "$@" >"$T/out" 2>"$T/err"; then
        [ "$(proxied)" -eq "$before" ] && pass "$name" || fail "$name" "went through the proxy"
    else
        fail "$name" "exit $?: $(head -c 400 "$T/err")"
    fi
}

# a host only the proxy can reach: looked up by the proxy, not here (the
# open resolved the URL's host itself and failed: "cannot resolve host")
through_proxy verify_via_http_proxy env http_proxy="$P" "$WPACK" verify "$FAR"
through_proxy via_all_proxy env all_proxy="$P" "$WPACK" inspect "$FAR"
through_proxy via_proxy_without_scheme env http_proxy="127.0.0.1:$PROXY_PORT" "$WPACK" inspect "$FAR"
rm -rf "$T/xp" "$T/xl"
through_proxy extract_via_proxy env http_proxy="$P" "$WPACK" extract -q -o "$T/xp" "$FAR"
"$WPACK" extract -q -o "$T/xl" "$T/www/a.wpack"
diff -r "$T/xp" "$T/xl" >/dev/null && pass extract_via_proxy_same || fail extract_via_proxy_same
# no_proxy names the hosts reached directly; HTTP_PROXY is not read (curl
# neither: in a CGI program it is the client's "Proxy:" header)
direct no_proxy_host env http_proxy="$P" no_proxy=127.0.0.1 "$WPACK" verify "$D"
direct no_proxy_upper env http_proxy="$P" NO_PROXY="example.org, 127.0.0.1" "$WPACK" verify "$D"
direct no_proxy_star env http_proxy="$P" no_proxy='*' "$WPACK" verify "$D"
direct http_proxy_upper_not_read env HTTP_PROXY="$P" "$WPACK" verify "$D"
direct https_proxy_not_for_http env https_proxy="$P" "$WPACK" verify "$D"
through_proxy no_proxy_other_host env http_proxy="$P" no_proxy=example.org,127.0.0.1 "$WPACK" verify "$FAR"
# a proxy that does not answer: an error naming no proxy password
closed=$(free_port)
expect_fail dead_proxy "weights.invalid" env http_proxy="http://u:SEKRIT@127.0.0.1:$closed" "$WPACK" inspect "$FAR"
grep -q SEKRIT "$T/err" && fail dead_proxy_password_hidden "$(cat "$T/err")" || pass dead_proxy_password_hidden

# The library reads no environment: with http_proxy set and no proxy
# option, wpack_open_url goes direct (libcurl read http_proxy itself).
# Python reads the variables as the CLI does; proxy="" or aws_env=False
# turns them off.
before=$(proxied)
if http_proxy="$P" py_wpack - "$D" >"$T/out" 2>"$T/err" <<'EOF'
import ctypes, sys
from wpack import _lib
lib = _lib.remote_lib()
o = _lib.RemoteOptions()
lib.wpack_remote_options_init(ctypes.byref(o))
o.retries = 0
p = ctypes.c_void_p()
rc = lib.wpack_open_url(ctypes.byref(p), sys.argv[1].encode(), ctypes.byref(o))
sys.exit("open: rc %d" % rc if rc else 0)
EOF
then
    [ "$(proxied)" -eq "$before" ] && pass library_reads_no_proxy_variable ||
        fail library_reads_no_proxy_variable "libcurl read http_proxy"
else
    fail library_reads_no_proxy_variable "$(head -c 300 "$T/err")"
fi
http_proxy="$P" through_proxy python_reads_http_proxy py_wpack -c \
    'import sys, wpack; f = wpack.safe_open(sys.argv[1], retries=0); print(list(f.keys())); f.close()' "$FAR"
http_proxy="$P" direct python_proxy_off py_wpack -c \
    'import sys, wpack; f = wpack.safe_open(sys.argv[1], proxy=""); f.close()' "$D"
http_proxy="$P" direct python_aws_env_false py_wpack -c \
    'import sys, wpack; f = wpack.safe_open(sys.argv[1], aws_env=False); f.close()' "$D"
through_proxy python_proxy_option py_wpack -c \
    'import sys, wpack; f = wpack.safe_open(sys.argv[1], proxy=sys.argv[2]); f.close()' "$FAR" "$P"
finish
