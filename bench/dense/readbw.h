/* readbw.h - measured read bandwidth for bench_dense. */
#ifndef BENCH_READBW_H
#define BENCH_READBW_H
#include <stddef.h>
double read_bandwidth_gbs(size_t bytes, unsigned threads, int passes);
#endif
