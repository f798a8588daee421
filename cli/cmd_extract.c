/* cmd_extract.c - `wpack extract`: tensors back out as .npy files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "npy.h"

static const char help[] =
    "usage: wpack extract ARCHIVE [-o DIR] [NAME_OR_PREFIX...]\n"
    "\n"
    "Writes each selected tensor (all when none is given) to DIR/NAME.npy\n"
    "(default DIR: the current directory), C order, little-endian, so that\n"
    "numpy.load gives back the packed array bit for bit. A NAME_OR_PREFIX is a\n"
    "tensor name, a name-map name, or a module path ('encoder.layers.0').\n"
    "\n"
    "numpy has no bf16 or float8: those are written as their raw bits ('<u2'\n"
    "for bf16, '|u1' for f8e4m3fn / f8e5m2) and the .npy header carries a\n"
    "comment naming the real dtype ('# wpack dtype bf16 (raw bits)'), which\n"
    "numpy ignores and `wpack create` reads back. Block-quantized tensors are\n"
    "written as their raw bytes ('|u1', one dim).\n"
    "\n"
    "File names: '/', '%' and a leading '.' in a tensor name are written as\n"
    "%2F, %25 and %2E, so no name can leave DIR; names longer than 200 bytes\n"
    "are cut and end in '~' and 16 hex digits of their XXH3.\n"
    "\n"
    "  -o, --output DIR   where to write (created if missing)\n"
    "  -q, --quiet        no summary line\n"
    "  --no-verify        do not check each tensor's bytes against its XXH3 as it\n"
    "                     is written (checked by default: a mismatch fails naming\n"
    "                     the tensor and leaves no file for it)\n";

/* The file name for a tensor name (see help). */
static void file_name(const char *name, size_t n, char *out, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '/' || c == '%' || (i == 0 && c == '.'))
            o += (size_t)snprintf(out + o, len - o, "%%%02X", c);
        else
            out[o++] = (char)c;
    }
    out[o] = 0;
    if (o > 200)
        snprintf(out + 180, len - 180, "~%016llx", (unsigned long long)wpk_xxh3(name, n));
}

typedef struct {
    const char *dir;
    uint64_t files, bytes;
    int failed;
} extract_state;

/* 1 when all n bytes were written. */
static int write_all(int fd, const void *p, size_t n)
{
    return wpk_write_all(fd, p, n) == 0;
}

static int put_fd(void *fd, const void *p, size_t n)
{
    return write_all(*(int *)fd, p, n) ? 0 : WPACK_E_IO;
}

/* Streamed (views straight from the mapping, each zstd chunk decoded
 * once), checked as it goes unless --no-verify: 0, WPACK_E_IO (errno set)
 * or the read's error (the archive's message says which tensor). */
static int write_tensor_bytes(int fd, const wpack_archive *ar, const wpack_tensor *t)
{
    return wpack_read_stream(ar, t->index, put_fd, &fd, 0);
}

static int extract_one(void *user, const wpack_archive *ar, const wpack_tensor *t)
{
    extract_state *st = user;
    char fname[512], path[4096], tmp[4200], header[1024];
    file_name(t->name, t->name_len, fname, sizeof fname);
    snprintf(path, sizeof path, "%s/%s.npy", st->dir, fname);
    size_t hlen;
    if (wpack_dtype_size(t->dtype)) {
        hlen = npy_format_header(header, sizeof header, t->dtype, t->rank, t->dims);
    } else {
        uint64_t dims[1] = {t->nbytes};
        hlen = npy_format_header(header, sizeof header, WPACK_DTYPE_U8, 1, dims);
    }
    if (!hlen) {
        cli_error("tensor '%s': cannot make a .npy header", t->name);
        st->failed = 1;
        return 1;
    }
    /* Temp file + rename: an interrupted extract never leaves a short .npy. */
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        cli_error("%s: cannot create: %s", path, strerror(errno));
        st->failed = 1;
        return 1;
    }
    mode_t mask = umask(0);
    umask(mask);
    int ok = fchmod(fd, 0666 & ~mask) == 0 && write_all(fd, header, hlen);
    int read_rc = ok ? write_tensor_bytes(fd, ar, t) : WPACK_OK;
    ok = ok && read_rc == WPACK_OK;
    int e = errno;
    ok = close(fd) == 0 && ok;
    if (ok && rename(tmp, path) != 0) {
        e = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        if (read_rc && read_rc != WPACK_E_IO)
            cli_error("%s: %s [%s]", path, wpack_errmsg(ar), wpack_error_name(read_rc));
        else
            cli_error("%s: writing tensor '%s' failed: %s", path, t->name, strerror(e));
        st->failed = 1;
        return 1;
    }
    st->files++;
    st->bytes += t->nbytes;
    return 0;
}

static int make_dirs(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return 0;
        *p = '/';
    }
    return mkdir(buf, 0777) == 0 || errno == EEXIST;
}

int cmd_extract(int argc, char **argv)
{
    const char *path = NULL, *v;
    extract_state st = {".", 0, 0, 0};
    int quiet = 0, verify = 1, r;
    const char **pats = calloc((size_t)argc + 1, sizeof *pats);
    size_t npats = 0;
    if (!pats)
        return CLI_FAIL;
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            free(pats);
            return CLI_OK;
        } else if ((r = cli_opt_value(argc, argv, &i, "-o", &v)) ||
                   (r = cli_opt_value(argc, argv, &i, "--output", &v))) {
            if (r < 0) {
                free(pats);
                return CLI_USAGE;
            }
            st.dir = v;
        } else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
            i++;
        } else if (strcmp(argv[i], "--no-verify") == 0) {
            verify = 0;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("extract: unknown option '%s'", argv[i]);
            free(pats);
            return CLI_USAGE;
        } else {
            if (!path)
                path = argv[i];
            else
                pats[npats++] = argv[i];
            i++;
        }
    }
    if (!path) {
        cli_error("extract: no ARCHIVE given (see wpack extract --help)");
        free(pats);
        return CLI_USAGE;
    }
    wpack_archive *ar;
    if (!(ar = cli_open_reads(path, verify))) {
        free(pats);
        return CLI_FAIL;
    }
    if (!make_dirs(st.dir)) {
        cli_error("%s: cannot create directory: %s", st.dir, strerror(errno));
        wpack_close(ar);
        free(pats);
        return CLI_FAIL;
    }
    if (!npats)
        pats[npats++] = "";
    for (size_t k = 0; k < npats && !st.failed; k++) {
        int64_t n = cli_select(ar, pats[k], extract_one, &st);
        if (n == 0) {
            cli_error("%s: no tensor named or under '%s'", path, pats[k]);
            st.failed = 1;
        }
    }
    wpack_close(ar);
    free(pats);
    if (!st.failed && !quiet) {
        char size[32];
        cli_human_size(size, sizeof size, st.bytes);
        fprintf(stderr, "extracted %llu tensors (%s) to %s\n", (unsigned long long)st.files, size,
                st.dir);
    }
    return st.failed ? CLI_FAIL : CLI_OK;
}
