/* cmd_run.c - `wpack run`: a chain of Linear / ReLU modules on the mapped weights. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_chain.h"

static const char help[] =
    "usage: wpack run ARCHIVE [--layers SPEC] --input X.npy [-o Y.npy] [--max-work-ratio N]\n"
    "\n"
    "Runs modules in order on the archive's mapped weights (no copy) and writes\n"
    "the last output as an f32 .npy, or prints it (one row a line) without -o.\n"
    "SPEC lists module paths, comma-separated: PREFIX is a Linear layer\n"
    "(PREFIX.weight [out, in], optional PREFIX.bias, PREFIX.weight_scale for\n"
    "scaled / int8 weights), PATH=relu an activation. nn.Sequential(Linear,\n"
    "ReLU, Linear) is --layers 0,1=relu,2. Without --layers, the archive's\n"
    "'wpack.layers' metadata is used (wpack create --layers SPEC).\n"
    "X.npy: f32 or f64, [batch, in] or [in]. Weights f32, f16, bf16, int8.\n"
    "Y.npy appears whole or not at all and may not be ARCHIVE or X.npy.\n"
    "\n"
    "environment: WPACK_ISA=scalar|avx2|avx512 forces a SIMD path,\n"
    "WPACK_THREADS=N the thread count, WPACK_SPIN_US=N how long idle pool\n"
    "threads spin before they sleep (default 5000; 0 never spin).\n"
    "  --isa    print the SIMD path and thread count in use, then exit\n"
    "  --no-verify  do not check the weights' bytes against their XXH3 before\n"
    "           use (checked by default, once each: a mismatch fails naming\n"
    "           the tensor, and Y.npy is not written)\n"
    "  --no-sync  do not fsync Y.npy (also WPACK_NO_SYNC=1; README: Durability)\n"
    CHAIN_WORK_HELP
    "ARCHIVE may be an http://, https:// or s3://BUCKET/KEY URL: only the byte\n"
    "ranges needed are fetched and each tensor is checked against its XXH3\n"
    "(README: Archives on object stores; AWS_* and WPACK_REMOTE_* settings).\n"
    CLI_CACHE_HELP;

int cmd_run(int argc, char **argv)
{
    const char *output = NULL;
    chain_args a = CHAIN_ARGS_INIT;
    int r, no_sync = cli_env_no_sync();
    for (int i = 1; i < argc;) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (strcmp(argv[i], "--isa") == 0) {
            const char *isa = wpack_dense_isa();
            if (!isa) {
                cli_error("%s", cli_env_dense_error());
                return CLI_FAIL;
            }
            printf("%s %u\n", isa, wpack_dense_threads());
            return CLI_OK;
        } else if (cli_no_sync_opt(argv, &i, &no_sync)) {
            continue;
        } else if ((r = cli_opt_output(argc, argv, &i, &output)) ||
                   (r = cli_remote_opt(argc, argv, &i)) ||
                   (r = chain_arg(argc, argv, &i, "run", &a))) {
            if (r < 0)
                return CLI_USAGE;
        }
    }
    if (!a.archive || !a.input) {
        fputs(help, stderr);
        return CLI_USAGE;
    }
    cli_files guard = {0};
    cli_files_in(&guard, a.input);
    cli_files_out(&guard, output);
    wpack_archive *ar = cli_open_checked("run", a.archive, &guard, a.verify);
    cli_files_free(&guard);
    if (!ar)
        return CLI_FAIL;
    char err[1024];
    chain c;
    float *x = NULL, *y = NULL;
    size_t batch, width, ow;
    memset(&c, 0, sizeof c);
    int rc = chain_read_npy(a.input, &x, &batch, &width, err, sizeof err);
    if (rc == WPACK_OK)
        rc = chain_build(ar, a.spec, width, a.work_ratio, &c, err, sizeof err);
    if (rc == WPACK_OK)
        rc = chain_run(&c, x, batch, width, &y, &ow, NULL, NULL, err, sizeof err);
    if (rc == WPACK_OK && output)
        rc = chain_write_npy(output, y, batch, ow, no_sync, err, sizeof err);
    if (rc == WPACK_OK && !output)
        for (size_t b = 0; b < batch; b++)
            for (size_t o = 0; o < ow; o++)
                printf("%.9g%c", y[b * ow + o], o + 1 == ow ? '\n' : ' ');
    if (rc)
        cli_error("%s [%s]", err, wpack_error_name(rc));
    chain_free(&c);
    free(x);
    free(y);
    wpack_close(ar);
    return rc ? CLI_FAIL : CLI_OK;
}
