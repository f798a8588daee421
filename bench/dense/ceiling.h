/* ceiling.h - the batch-1 loop's best case against OpenBLAS (ceiling.c). */
#ifndef WPACK_BENCH_CEILING_H
#define WPACK_BENCH_CEILING_H

/* Print the table; threads: the run's thread count (OpenBLAS uses it);
 * block_s and rounds: how long each block of calls and how many rounds
 * (bench_block). */
void print_ceiling(unsigned threads, double block_s, int rounds);

#endif
