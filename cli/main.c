/* main.c - `wpack`: dispatch to the subcommands. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: wpack COMMAND [OPTIONS] ...\n"
    "\n"
    "Archives of ML model weights: dotted module paths -> tensors, metadata,\n"
    "a name map and calibration statistics (spec/wpack-format.md).\n"
    "\n"
    "commands:\n"
    "  create   -o OUT.wpack [-j N] [options] INPUT...  pack .npy, torch.save, safetensors, npz/tar,\n"
    "           raw, GGUF, .irpa (torch.ao observers become activation stats)\n"
    "  inspect  [--json] ARCHIVE [PREFIX]          list tensors, metadata and stats\n"
    "  verify   ARCHIVE                            check checksums, bool values, padding\n"
    "  extract  ARCHIVE [-o DIR] [NAME_OR_PREFIX...]  write tensors as .npy files\n"
    "  convert  ARCHIVE --compress zstd[:L]|--decompress -o OUT|--in-place  rewrite compressed or plain\n"
    "  export   ARCHIVE --to FORMAT -o FILE  safetensors, npz, tar, gguf, irpa, trt-calib, ort-calib-json\n"
    "  resolve  ARCHIVE IN.mlir -o OUT.mlir [--emit uri|iree|inline]  point MLIR globals at entries\n"
    "           [--annotate [--form attrs|quant]]  and attach activation ranges to ops\n"
    "  externalize IN.mlir -o OUT.mlir --archive NEW.wpack  move inline MLIR weights into an archive\n"
    "  run      ARCHIVE [--layers SPEC] --input X.npy [-o Y.npy]  run Linear/ReLU layers\n"
    "  calibrate ARCHIVE [--layers SPEC] --input S.npy [--histogram N]  store activation stats\n"
    "  cast     ARCHIVE --to bf16|f16|int8 [--only GLOB] -o OUT|--in-place  weights for the fast paths\n"
    "  update   ARCHIVE [--stats[-from] F] [--meta K=V] [--name O=E] [--drop-stats K[:KIND]]  in place\n"
    "\n"
    "  ARCHIVE of inspect, verify, extract, export, resolve, run may be an\n"
    "  http://, https:// or s3:// URL, the scheme in any case (HTTPS:// too;\n"
    "  a local path starting so is written ./HTTPS://...; README: Archives on\n"
    "  object stores); --cache DIR keeps its fetched chunks for the next run\n"
    "\n"
    "  Options take a value as --opt V or --opt=V; -o and -j also as -oOUT, -j2.\n"
    "\n"
    "  wpack COMMAND --help   options of one command\n"
    "  wpack --version        library and format versions\n"
    "\n"
    "Exit status: 0 success, 1 failure (the message says what and where), 2 usage.\n"
    "An output that is the same file as an input is refused before anything is\n"
    "read; a write-protected file (no write bit: chmod a-w) is never replaced\n"
    "nor updated, even by root; outputs appear whole or not at all (README:\n"
    "Outputs never destroy inputs), and are durable (fsynced) when the command\n"
    "ends; --no-sync or WPACK_NO_SYNC=1 skips the fsyncs of every command that\n"
    "writes a file, but not of update and calibrate, which change an archive\n"
    "in place (README: Durability).\n"
    "\n"
    /* every variable cli/ reads (tests/cli/test_help_env.sh checks it) */
    "Environment (read by this CLI only; the libraries read none):\n"
    "  WPACK_THREADS=N       threads for layers and zstd decoding (default: online\n"
    "                        CPUs) and for create/cast weight stats (default 1; -j N)\n"
    "  WPACK_SPIN_US=N       microseconds an idle pool thread spins (default 5000)\n"
    "  WPACK_ISA=scalar|avx2|avx512  force the dense kernel's path (scalar: also the\n"
    "                        writer's portable weight-stats path)\n"
    "  WPACK_DENSE_MIN_PARALLEL=MACS  layers below this size run on one thread\n"
    "  WPACK_NO_COPY_RANGE=1 copy tensor bytes with read/write, not copy_file_range\n"
    "  WPACK_NO_SYNC=1       as --no-sync (above)\n"
    "  WPACK_FOLLOW_LINKS=1  the shards of a sharded set may be symbolic links\n"
    "  TMPDIR                where create spills Fortran-order bundle members (/tmp)\n"
    "  URL archives (README: Archives on object stores):\n"
    "  WPACK_CACHE=DIR       the chunk cache when --cache is not given\n"
    "  WPACK_REMOTE_CONNECTIONS (8, at most 64), WPACK_REMOTE_CHUNK (bytes, 8M),\n"
    "  WPACK_REMOTE_RETRIES (4), WPACK_REMOTE_TIMEOUT (seconds, 30),\n"
    "  WPACK_REMOTE_MAX_RATE (bytes/s, none), WPACK_REMOTE_REDIRECTS=0 (not followed)\n"
    "  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN  s3:// credentials\n"
    "  AWS_REGION (or AWS_DEFAULT_REGION), AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL)\n"
    "  CURL_CA_BUNDLE (or SSL_CERT_FILE)  the CA bundle for https\n"
    "  https_proxy or HTTPS_PROXY (https, s3), http_proxy (http), all_proxy or\n"
    "  ALL_PROXY (else), no_proxy or NO_PROXY: proxies, as curl reads them\n";

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"create", cmd_create},
    {"inspect", cmd_inspect},
    {"verify", cmd_verify},
    {"extract", cmd_extract},
    {"convert", cmd_convert},
    {"export", cmd_export},
    {"resolve", cmd_resolve},
    {"externalize", cmd_externalize},
    {"run", cmd_run},
    {"calibrate", cmd_calibrate},
    {"cast", cmd_cast},
    {"update", cmd_update},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    cli_error("unknown command '%s' (try wpack --help)", name);
    return NULL;
}

/* Archives are read through a map: a file another process truncates under
 * us makes the next read of a page past its new end a SIGBUS, which would
 * end the run as a "Bus error" crash. Say what happened instead and exit 1;
 * outputs are as after a kill (not in place; temporaries swept next run). */
static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] =
        "wpack: a file being read shrank under this run (truncated by another process?): "
        "stopped, nothing more written [WPACK_E_TRUNCATED]\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(CLI_FAIL);
}

/* What a command printed must have reached standard output: `wpack
 * inspect --json A > f.json` on a full disk (or into a closed stdout) left
 * a cut f.json and exited 0. A failed write makes the status 1, said once. */
static int stdout_written(int rc)
{
    int e = fflush(stdout) != 0 ? errno : 0;
    if (!e && !ferror(stdout))
        return rc;
    cli_error("writing standard output failed: %s: what was printed is incomplete [%s]",
              e ? strerror(e) : "a write failed", wpack_error_name(WPACK_E_IO));
    return rc == CLI_OK ? CLI_FAIL : rc;
}

static int run(int argc, char **argv);

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    /* A file-size limit (ulimit -f) reached: the write fails with EFBIG,
     * which the writer reports (path, what) and cleans up after, instead
     * of SIGXFSZ killing the run with no message and its temporary left. */
    signal(SIGXFSZ, SIG_IGN);
    return stdout_written(run(argc, argv));
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    cli_env_apply(); /* the libraries read no environment: the CLI passes it in */
    cli_hide_url_secrets(argc, argv);
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 && argc > 2) {
        /* `wpack help create` is `wpack create --help` */
        const command *c = find_command(argv[2]);
        char *sub[] = {argv[2], "--help", NULL};
        return c ? c->run(2, sub) : CLI_USAGE;
    }
    if (cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("wpack %s (library %s, format %d.%d)\n", WPACK_VERSION_STRING,
               wpack_version_string(), WPACK_FORMAT_MAJOR, WPACK_FORMAT_MINOR);
        return CLI_OK;
    }
    const command *c = find_command(cmd);
    return c ? c->run(argc - 1, argv + 1) : CLI_USAGE;
}
