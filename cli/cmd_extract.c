/* cmd_extract.c - `wpack extract`: tensors back out as .npy files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"
#include "export.h"
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
    "File names: '/', '%', '\\' and a leading '.' in a tensor name are written\n"
    "as %2F, %25, %5C and %2E, so no name can leave DIR and `wpack create DIR`\n"
    "gives the names back; names longer than 200 bytes are cut (at most 180\n"
    "bytes kept, whole characters) and end in '~' and 16 hex digits of their\n"
    "XXH3.\n"
    "\n"
    "Before anything is written: every NAME_OR_PREFIX must select a tensor, no\n"
    "two selected tensors may map to one file name (both are named), no\n"
    "DIR/NAME.npy may be a directory, FIFO or device (WPACK_E_FILE_TYPE), and\n"
    "the total must fit the output cap and the free space (WPACK_E_TOO_LARGE).\n"
    "A refusal creates nothing, not even DIR.\n"
    "\n"
    "A file system that folds names (case-insensitive or normalizing: ext4\n"
    "casefold, vfat, exfat, APFS, NTFS) can take two file names for one file\n"
    "('A.npy', 'a.npy'). No file this run wrote is replaced: before each rename\n"
    "the target is looked at, and one that is a file of this run (device and\n"
    "inode) stops the run (WPACK_E_SAME_FILE, naming both tensors and paths)\n"
    "with the earlier file whole and the files before the refused one in place.\n"
    "\n"
    "Each file appears whole or not at all (a temporary NAME.npy.tmp-PID-RANDOM\n"
    "beside it, renamed over it; a killed run's temporaries in DIR are removed\n"
    "by the next extract to DIR). A DIR/NAME.npy that is the archive itself, one\n"
    "of its shards or a link to them is refused before anything is written. A\n"
    "failure midway leaves the files written before it (each whole) and says\n"
    "how many.\n"
    "\n"
    "  -o, --output DIR     where to write (created if missing)\n"
    "  --max-output SIZE    cap on the bytes written (default: the larger of\n"
    "                       1 GiB and 1000 x the archive's size)\n"
    "  --no-verify          do not check each tensor's bytes against its XXH3 as it\n"
    "                       is written (checked by default: a mismatch fails naming\n"
    "                       the tensor and leaves no file for it)\n"
    "  -q, --quiet          no progress or summary line\n"
    "  --no-sync            do not fsync the files (also WPACK_NO_SYNC=1): faster,\n"
    "                       and each is still whole or absent for other processes,\n"
    "                       but a power loss or OS crash may leave some missing,\n"
    "                       empty or torn (README: Durability)\n"
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

/* The file name for a tensor name (see help): the exporters' escapes, and a
 * name too long for a file system cut with its hash after it. */
static void file_name(const char *name, size_t n, char *out, size_t len)
{
    if (wpk_entry_file_name(name, n, out, len) > 200) {
        /* cut at most 180 bytes in, not inside a %XX escape nor a UTF-8
         * character: the file name stays UTF-8 (create reads it back) */
        size_t cut = 180;
        if (out[cut - 1] == '%')
            cut -= 1;
        else if (out[cut - 2] == '%')
            cut -= 2;
        while (((unsigned char)out[cut] & 0xc0) == 0x80)
            cut--;
        snprintf(out + cut, len - cut, "~%016llx", (unsigned long long)wpk_xxh3(name, n));
    }
}

/* Written files wait, open and locked under their temporary names, to be
 * made durable and renamed together (wpk_atomic_commit_all: one fsync per
 * file after all are written and one of DIR, not two barriers per file);
 * at most this many at once, within the open-file limit. */
enum { BATCH_MAX = 1024, BATCH_MIN = 16 };

/* What one run will write, decided before anything is: each selected entry
 * once, with its file name (without DIR and ".npy"). */
typedef struct {
    uint64_t index;
    char *file;
} pick;

typedef struct {
    pick *v;
    size_t n, cap;
    unsigned char *seen; /* by entry index: selected twice is written once */
} pick_list;

typedef struct {
    const char *dir;
    uint64_t files, bytes;
    int failed;
    unsigned read_flags;   /* for wpack_read_to_fd */
    unsigned atomic_flags; /* WPK_ATOMIC_NO_SWEEP, and NO_SYNC under --no-sync */
    wpk_atomic *pending;   /* written, not yet in place */
    uint64_t *pending_bytes;
    size_t npending, batch;
    wpk_atomic_run run;    /* the files put in place, by device and inode: tag k is l->v[k] */
    const wpack_archive *ar;
    const pick_list *l;
} extract_state;

/* The files this run may hold open at once: the soft open-file limit less
 * room for the archive, its shards and the libraries. */
static size_t batch_size(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < BATCH_MIN + 192)
        return BATCH_MIN;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur - 192 > BATCH_MAX)
        return BATCH_MAX;
    return (size_t)(rl.rlim_cur - 192);
}

/* The waiting files into place (see BATCH_MAX); 0 done, 1 failed (printed). */
static int commit_pending(extract_state *st)
{
    if (!st->npending)
        return 0;
    char err[600];
    int rc = wpk_atomic_commit_all(st->pending, st->npending, err, sizeof err);
    if (rc == WPACK_OK)
        for (size_t k = 0; k < st->npending; k++) {
            st->files++;
            st->bytes += st->pending_bytes[k];
        }
    st->npending = 0;
    if (rc == WPACK_E_SAME_FILE && st->run.clash_old < st->l->n && st->run.clash_new < st->l->n) {
        /* two names the file system takes for one (atomic_file.h) */
        const pick *o = &st->l->v[st->run.clash_old], *w = &st->l->v[st->run.clash_new];
        wpack_tensor a, b;
        wpack_tensor_at(st->ar, o->index, &a);
        wpack_tensor_at(st->ar, w->index, &b);
        cli_error("%s: tensors '%s' and '%s' would both be written to one file: this file "
                  "system takes %s/%s.npy and %s/%s.npy for one name (it ignores case or "
                  "normalizes names); the file of '%s' is kept, '%s' and the tensors after it "
                  "are not extracted (extract them one at a time into different directories) "
                  "[%s]",
                  st->dir, a.name, b.name, st->dir, o->file, st->dir, w->file, a.name, b.name,
                  wpack_error_name(rc));
        st->failed = 1;
        return 1;
    }
    if (rc) {
        cli_error("%s [%s]", err, wpack_error_name(rc));
        st->failed = 1;
        return 1;
    }
    return 0;
}

/* 1 when all n bytes were written. */
static int write_all(int fd, const void *p, size_t n)
{
    return wpk_write_all(fd, p, n) == 0;
}

/* The .npy header for t into header; its length, 0 when none can be made. */
static size_t npy_header_of(const wpack_tensor *t, char *header, size_t len)
{
    if (wpack_dtype_size(t->dtype))
        return npy_format_header(header, len, t->dtype, t->rank, t->dims);
    uint64_t dims[1] = {t->nbytes};
    return npy_format_header(header, len, WPACK_DTYPE_U8, 1, dims);
}

static int extract_one(extract_state *st, const wpack_archive *ar, const wpack_tensor *t,
                       size_t k)
{
    const char *fname = st->l->v[k].file;
    char path[4096], header[1024];
    snprintf(path, sizeof path, "%s/%s.npy", st->dir, fname);
    size_t hlen = npy_header_of(t, header, sizeof header);
    if (!hlen) {
        cli_error("tensor '%s': cannot make a .npy header: " NPY_NO_HEADER_WHY " [%s]", t->name,
                  wpack_error_name(WPACK_E_UNSUPPORTED));
        st->failed = 1;
        return 1;
    }
    /* Temp file + rename: an interrupted extract never leaves a short .npy.
     * (DIR's dead temporaries were swept once, in cmd_extract.) */
    if (st->npending == st->batch && commit_pending(st))
        return 1;
    wpk_atomic *ap = &st->pending[st->npending], a;
    char err[600];
    int rc = wpk_atomic_open(&a, path, st->atomic_flags, err, sizeof err);
    if (rc == WPACK_OK) {
        wpk_atomic_join(&a, &st->run, k); /* no file of this run is replaced */
        /* The bytes: copied file to file where they are stored plain, read
         * back and checked unless --no-verify (wpack_read_to_fd). */
        int header_ok = write_all(a.fd, header, hlen);
        int code = header_ok ? wpack_read_to_fd(ar, t->index, a.fd, st->read_flags) : WPACK_E_IO;
        if (!header_ok)
            wpk_fmt(err, sizeof err, "%s: writing tensor '%s' failed: %s", path, t->name,
                    strerror(errno));
        else if (code) /* the archive's message names the tensor and the fault */
            wpk_fmt(err, sizeof err, "%s: %s", path, wpack_errmsg(ar));
        rc = code;
    }
    if (rc) {
        wpk_atomic_abort(&a); /* the files before it still go in place (cmd_extract) */
        cli_error("%s [%s]", err, wpack_error_name(rc));
        st->failed = 1;
        return 1;
    }
    wpk_atomic_kick(&a); /* its writeback overlaps the next files' writing */
    *ap = a;
    st->pending_bytes[st->npending++] = t->nbytes;
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

/* cli_select callback: note each selected entry once. */
static int add_pick(void *user, const wpack_archive *ar, const wpack_tensor *t)
{
    (void)ar;
    pick_list *l = user;
    if (l->seen[t->index])
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        pick *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return 1;
        l->v = v;
        l->cap = cap;
    }
    char fname[512];
    file_name(t->name, t->name_len, fname, sizeof fname);
    if (!(l->v[l->n].file = strdup(fname)))
        return 1;
    l->v[l->n++].index = t->index;
    l->seen[t->index] = 1;
    return 0;
}

static int by_file(const void *a, const void *b)
{
    const pick *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int by_index(const void *a, const void *b)
{
    const pick *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Everything that can refuse the run, before anything is created: each
 * pattern selects something, no two tensors share a file name, the total
 * fits the cap and the disk. Returns 1 to go on. */
static int plan(const wpack_archive *ar, const char *path, const char *dir, const char **pats,
                size_t npats, uint64_t max_output, pick_list *l, uint64_t *data)
{
    if (!(l->seen = calloc(wpack_count(ar) + 1, 1))) {
        cli_error("extract: out of memory [%s]", wpack_error_name(WPACK_E_NOMEM));
        return 0;
    }
    for (size_t k = 0; k < npats; k++) {
        int64_t n = cli_select(ar, pats[k], add_pick, l);
        if (n < 0) {
            cli_error("extract: out of memory [%s]", wpack_error_name(WPACK_E_NOMEM));
            return 0;
        }
        if (n == 0 && !*pats[k]) {
            cli_error("%s has no tensors: nothing extracted [%s]", path,
                      wpack_error_name(WPACK_E_EMPTY));
            return 0;
        }
        if (n == 0) {
            cli_error("%s: no tensor named or under '%s': nothing extracted [%s]", path, pats[k],
                      wpack_error_name(WPACK_E_NOT_FOUND));
            return 0;
        }
    }
    qsort(l->v, l->n, sizeof *l->v, by_file);
    for (size_t i = 1; i < l->n; i++) {
        if (strcmp(l->v[i - 1].file, l->v[i].file) == 0) {
            wpack_tensor a, b;
            wpack_tensor_at(ar, l->v[i - 1].index, &a);
            wpack_tensor_at(ar, l->v[i].index, &b);
            cli_error("%s: tensors '%s' and '%s' would both be written to %s/%s.npy: nothing "
                      "extracted (extract them one at a time into different directories) [%s]",
                      path, a.name, b.name, dir, l->v[i].file,
                      wpack_error_name(WPACK_E_SAME_FILE));
            return 0;
        }
    }
    qsort(l->v, l->n, sizeof *l->v, by_index);
    uint64_t total = 0;
    *data = 0;
    for (size_t i = 0; i < l->n; i++) {
        wpack_tensor t;
        char header[1024];
        wpack_tensor_at(ar, l->v[i].index, &t);
        size_t hlen = npy_header_of(&t, header, sizeof header);
        if (!hlen) {
            cli_error("tensor '%s': cannot make a .npy header: " NPY_NO_HEADER_WHY
                      "; nothing extracted [%s]", t.name, wpack_error_name(WPACK_E_UNSUPPORTED));
            return 0;
        }
        uint64_t add = t.nbytes + hlen; /* nbytes < 2^63: checked at open */
        total = total > UINT64_MAX - add ? UINT64_MAX : total + add;
        *data += t.nbytes; /* <= total */
    }
    return cli_check_output("extract", dir, total, cli_input_bytes(ar), max_output, 1);
}

/* Every DIR/NAME.npy against the archive and its shards (the same-file
 * guard), before any is written. */
static int guard_outputs(const wpack_archive *ar, const char *path, const char *dir,
                         const pick_list *l, unsigned atomic_flags)
{
    cli_files guard = {.outputs_distinct = 1}; /* plan() refused colliding file names */
    cli_files_in(&guard, path);
    cli_files_archive_shards(&guard, ar);
    char out[4200], err[4400];
    int ok = 1;
    for (size_t k = 0; k < l->n && ok; k++) {
        snprintf(out, sizeof out, "%s/%s.npy", dir, l->v[k].file);
        cli_files_out(&guard, out);
        /* a directory, FIFO or device there is refused before any file is
         * written, not after those before it in the list */
        int rc = wpk_atomic_check(out, atomic_flags, err, sizeof err);
        if (rc) {
            cli_error("%s: nothing extracted [%s]", err, wpack_error_name(rc));
            ok = 0;
        }
    }
    ok = ok && cli_files_check("extract", &guard);
    cli_files_free(&guard);
    return ok;
}

int cmd_extract(int argc, char **argv)
{
    const char *path = NULL;
    extract_state st = {".", 0, 0, 0, cli_read_to_fd_flags(), WPK_ATOMIC_NO_SWEEP, NULL, NULL,
                        0, batch_size(), {0}, NULL, NULL};
    cli_write_opts wo = CLI_WRITE_OPTS_INIT;
    int r;
    const char **pats = calloc((size_t)argc + 1, sizeof *pats);
    size_t npats = 0;
    if (!pats)
        return CLI_FAIL;
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            free(pats);
            return CLI_OK;
        } else if ((r = cli_opt_output(argc, argv, &i, &st.dir))) {
            if (r < 0) {
                free(pats);
                return CLI_USAGE;
            }
        } else if ((r = cli_write_opt(argc, argv, &i, &wo)) ||
                   (r = cli_remote_opt(argc, argv, &i))) {
            if (r < 0) {
                free(pats);
                return CLI_USAGE;
            }
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
    if (!(ar = cli_open_reads(path, wo.verify))) {
        free(pats);
        return CLI_FAIL;
    }
    if (!npats)
        pats[npats++] = "";
    pick_list l = {0};
    uint64_t data = 0;
    st.ar = ar;
    st.l = &l;
    struct stat sb;
    int dir_existed = stat(st.dir, &sb) == 0;
    if (!plan(ar, path, st.dir, pats, npats, wo.max_output, &l, &data) ||
        !guard_outputs(ar, path, st.dir, &l, st.atomic_flags)) {
        st.failed = 1;
    } else if (!make_dirs(st.dir)) {
        cli_error("%s: cannot create directory: %s [%s]", st.dir, strerror(errno),
                  wpack_error_name(WPACK_E_IO));
        st.failed = 1;
    } else if (!(st.pending = calloc(st.batch, sizeof *st.pending)) ||
               !(st.pending_bytes = calloc(st.batch, sizeof *st.pending_bytes))) {
        cli_error("extract: out of memory [%s]", wpack_error_name(WPACK_E_NOMEM));
        st.failed = 1;
    } else {
        wpk_atomic_sweep_dir(st.dir, ".npy"); /* temporaries of killed extracts */
    }
    if (wo.no_sync)
        st.atomic_flags |= WPK_ATOMIC_NO_SYNC;
    if (!st.failed) { /* a remote archive fetches ahead, in this order (a hint) */
        uint64_t *order = malloc((l.n ? l.n : 1) * sizeof *order);
        for (size_t k = 0; order && k < l.n; k++)
            order[k] = l.v[k].index;
        if (order)
            wpack_read_plan(ar, order, l.n);
        free(order);
    }
    cli_progress prog;
    cli_progress_init(&prog, data, l.n, wo.quiet);
    for (size_t k = 0; k < l.n && !st.failed; k++) {
        wpack_tensor t;
        wpack_tensor_at(ar, l.v[k].index, &t);
        prog.label = t.name;
        cli_progress_update(&prog, 0);
        if (extract_one(&st, ar, &t, k))
            break;
        prog.done_items++;
        prog.done_bytes += t.nbytes;
    }
    commit_pending(&st); /* also after a failure: the files before it appear, as ever */
    wpk_atomic_run_free(&st.run);
    free(st.pending);
    free(st.pending_bytes);
    if (l.n && prog.done_items)
        cli_progress_done(&prog);
    if (st.failed && !st.files && !dir_existed)
        rmdir(st.dir); /* a failed run leaves no empty directory behind */
    if (st.failed && st.files) /* not silent about what the failure left */
        cli_error("extract: %llu of %zu tensors were written to %s before the failure (each whole); "
                  "the others were not", (unsigned long long)st.files, l.n, st.dir);
    for (size_t k = 0; k < l.n; k++)
        free(l.v[k].file);
    free(l.v);
    free(l.seen);
    wpack_close(ar);
    free(pats);
    if (!st.failed && !wo.quiet) {
        char size[32];
        cli_human_size(size, sizeof size, st.bytes);
        cli_line(stderr, "extracted %llu tensors (%s) to %s", (unsigned long long)st.files, size,
                 st.dir);
    }
    return st.failed ? CLI_FAIL : CLI_OK;
}
