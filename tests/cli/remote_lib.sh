# remote_lib.sh - servers on loopback for tests/cli/test_remote*.sh (sourced
# after lib.sh): a real nginx serving a directory, and remote_server.py (a
# server that misbehaves on purpose, and a fake S3). Both run as the current
# user with files under $T only, on ports the kernel picks, and are stopped
# by the EXIT trap.
SERVER_PIDS=""
trap 'for p in $SERVER_PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT

free_port() {
    $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nginx_conf DIR HTTP_BODY: DIR/nginx.conf for one nginx of this script
# (in the foreground, its pid, logs and temporary files in DIR), HTTP_BODY
# inside its http block.
nginx_conf() {
    local d=$1 user=""
    [ "$(id -u)" -eq 0 ] && user="user root root;"
    cat >"$d/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log;
$user
events { worker_connections 64; }
http {
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    default_type application/octet-stream;
$2
}
NGX
}

# start_nginx DIR: serve DIR at http://127.0.0.1:$NGINX_PORT; its access log
# ($T/nginx/access.log) has one line per request: "METHOD URI RANGE STATUS BYTES";
# $T/nginx/conn.log: "CONNECTION_ID REQUESTS_ON_IT RANGE STATUS BYTES".
start_nginx() {
    local root=$1 bin
    bin=$(command -v nginx || echo /usr/sbin/nginx)
    [ -x "$bin" ] || return 1
    mkdir -p "$T/nginx"
    NGINX_PORT=$(free_port)
    nginx_conf "$T/nginx" "
    log_format ranges '\$request_method \$uri \"\$http_range\" \$status \$body_bytes_sent';
    access_log $T/nginx/access.log ranges;
    # the TCP connection of each request (counts connections reused)
    log_format conns '\$connection \$connection_requests \"\$http_range\" \$status \$body_bytes_sent';
    access_log $T/nginx/conn.log conns;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $root;
    }"
    run_nginx "$bin" "$T/nginx" "$NGINX_PORT"
}

# run_nginx BIN DIR PORT: nginx with DIR/nginx.conf in the background (a
# server of this script), then wait until PORT answers (up to about a
# minute: a loaded CI machine), its logs on failure.
run_nginx() {
    local bin=$1 d=$2 port=$3
    "$bin" -e "$d/error.log" -p "$d" -c "$d/nginx.conf" >"$d/stdout" 2>&1 &
    SERVER_PIDS="$SERVER_PIDS $!"
    for _ in $(seq 300); do
        $PY -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$d/error.log" "$d/stdout" >&2
    return 1
}

# serve_small_archive: $T/www/a.wpack (4096 f32) served by need_nginx.
serve_small_archive() {
    mkdir -p "$T/www"
    "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1], np.arange(4096, dtype=np.float32))' "$T/t.npy"
    expect create "$WPACK" create -q -o "$T/www/a.wpack" "$T/t.npy"
    need_nginx "$T/www"
}

# need_nginx DIR: start_nginx DIR and pass nginx_started, or fail it and end
# the script (every later case needs the server).
need_nginx() {
    if ! start_nginx "$1"; then
        fail nginx_started "nginx is not installed or did not start (tools/deps.sh installs it)"
        finish
        exit 1
    fi
    pass nginx_started
}

# start_bad_server ROOT [REDIRECT_BASE]: remote_server.py at $BAD_PORT
# (waits up to 30 s for its port file).
start_bad_server() {
    rm -f "$T/bad.port"
    $PY "$TESTS_DIR/cli/remote_server.py" "$1" "$T/bad.port" "${2:-}" 2>"$T/bad.err" &
    SERVER_PIDS="$SERVER_PIDS $!"
    for _ in $(seq 300); do
        [ -s "$T/bad.port" ] && BAD_PORT=$(cat "$T/bad.port") && return 0
        sleep 0.1
    done
    cat "$T/bad.err" >&2
    return 1
}

# need_bad_server ROOT [REDIRECT_BASE]: start_bad_server and set $B to its
# URL, or fail server_started and end the script (every later case needs it).
need_bad_server() {
    if ! start_bad_server "$@"; then
        fail server_started "$(cat "$T/bad.err")"
        finish
        exit 1
    fi
    B="http://127.0.0.1:$BAD_PORT"
}

# same_output NAME LOCAL URL CMD-WITH-@A@...: the command on the URL and
# on the local path print the same (the archive's own name replaced).
same_output() {
    local name=$1 local_a=$2 url=$3; shift 3
    local args_l=() args_u=() a
    for a in "$@"; do args_l+=("${a//@A@/$local_a}"); args_u+=("${a//@A@/$url}"); done
    if ! "$WPACK" "${args_u[@]}" >"$T/o.url" 2>"$T/e.url"; then
        fail "$name" "url: $(head -c 400 "$T/e.url")"; return
    fi
    "$WPACK" "${args_l[@]}" >"$T/o.local" 2>&1
    sed -i -e "s|$url|ARCHIVE|g" -e "s|${url%/*}/|DIR/|g" "$T/o.url"
    sed -i -e "s|$local_a|ARCHIVE|g" -e "s|${local_a%/*}/|DIR/|g" "$T/o.local"
    cmp -s "$T/o.url" "$T/o.local" && pass "$name" || fail "$name" "$(diff "$T/o.url" "$T/o.local" | head -5)"
}

# reads_equal NAME LOCAL URL: inspect (text and JSON) and verify of URL
# print what they print for LOCAL; extract and export of URL write the
# same bytes.
reads_equal() {
    local n=$1 l=$2 u=$3
    same_output "inspect_$n" "$l" "$u" inspect @A@
    same_output "inspect_json_$n" "$l" "$u" inspect --json @A@
    same_output "verify_$n" "$l" "$u" verify @A@
    rm -rf "$T/xu" "$T/xl"
    expect "extract_$n" "$WPACK" extract -q -o "$T/xu" "$u"
    "$WPACK" extract -q -o "$T/xl" "$l"
    diff -r "$T/xu" "$T/xl" >/dev/null && pass "extract_same_bytes_$n" || fail "extract_same_bytes_$n"
    rm -f "$T/u.st" "$T/l.st"
    expect "export_$n" "$WPACK" export "$u" --to safetensors -o "$T/u.st"
    "$WPACK" export "$l" --to safetensors -o "$T/l.st" >/dev/null 2>&1
    cmp -s "$T/u.st" "$T/l.st" && pass "export_same_bytes_$n" || fail "export_same_bytes_$n"
}

# start_nginx_tls DIR HTTP_PORT: serve DIR over https at
# https://127.0.0.1:$TLS_PORT with a certificate of a CA made here
# ($T/tls/ca.pem, for 127.0.0.1 and localhost, and the names of $TLS_NAMES,
# "DNS:NAME,..." if set); /tohttp/F answers 302 to
# http://127.0.0.1:HTTP_PORT/F (a downgrade); $TLS_EXTRA, if set, goes into
# its server block.
start_nginx_tls() {
    local root=$1 http_port=$2 bin d="$T/tls"
    bin=$(command -v nginx || echo /usr/sbin/nginx)
    [ -x "$bin" ] && command -v openssl >/dev/null || return 1
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=wpack test CA" \
        -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1 || return 1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost%s\n' "${TLS_NAMES:+,$TLS_NAMES}" >"$d/ext"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$d/key.pem" \
        -out "$d/req.pem" >/dev/null 2>&1 &&
        openssl x509 -req -in "$d/req.pem" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
            -days 2 -extfile "$d/ext" -out "$d/cert.pem" >/dev/null 2>&1 || return 1
    TLS_PORT=$(free_port)
    nginx_conf "$d" "
    access_log $d/access.log;
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        ssl_certificate $d/cert.pem;
        ssl_certificate_key $d/key.pem;
        root $root;
        location /tohttp/ { rewrite ^/tohttp/(.*)\$ http://127.0.0.1:$http_port/\$1 redirect; }
        ${TLS_EXTRA:-}
    }"
    run_nginx "$bin" "$d" "$TLS_PORT"
}
