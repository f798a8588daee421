/*
 * layout.h - byte layout of a wpack archive, format 1.0 (spec/wpack-format.md).
 *
 * Every multi-byte integer and float is little-endian. Offsets named *_OFF
 * are byte positions inside their record. The reader and the writer both use
 * these numbers, so the code and the spec cannot drift apart silently: the
 * golden archives in tests/golden pin them.
 *
 * File:  [superblock 128 B][zero pad to data_offset][data region]
 *        [zero pad to 8][index][trailer 128 B]
 */
#ifndef WPACK_FORMAT_LAYOUT_H
#define WPACK_FORMAT_LAYOUT_H

#include <stdint.h>

/* ---- superblock (offset 0) and trailer (last 128 bytes): same layout ---- */
#define WPK_HEADER_SIZE 128u
/* PNG-style: a high-bit byte, CR LF, ^Z, LF catch 7-bit and text-mode mangling. */
#define WPK_SUPERBLOCK_MAGIC "\x89WPK\r\n\x1a\n"
#define WPK_TRAILER_MAGIC "\x89WPT\r\n\x1a\n"
#define WPK_ENDIAN_MARKER 0x01020304u  /* stored LE: bytes 04 03 02 01 */

#define WPK_H_MAGIC_OFF 0          /* 8 bytes */
#define WPK_H_MAJOR_OFF 8          /* u16 */
#define WPK_H_MINOR_OFF 10         /* u16 */
#define WPK_H_ENDIAN_OFF 12        /* u32 */
#define WPK_H_HEADER_SIZE_OFF 16   /* u32, = 128 */
#define WPK_H_ALIGNMENT_OFF 20     /* u32 */
#define WPK_H_REQUIRED_OFF 24      /* u64 required feature bits */
#define WPK_H_OPTIONAL_OFF 32      /* u64 optional feature bits */
#define WPK_H_GENERATION_OFF 40    /* u64 */
#define WPK_H_DATA_OFFSET_OFF 48   /* u64 */
#define WPK_H_DATA_LENGTH_OFF 56   /* u64 */
#define WPK_H_INDEX_OFFSET_OFF 64  /* u64 */
#define WPK_H_INDEX_LENGTH_OFF 72  /* u64 */
#define WPK_H_INDEX_CHECKSUM_OFF 80 /* u64 XXH3-64 of the index bytes */
#define WPK_H_FILE_LENGTH_OFF 88   /* u64 */
#define WPK_H_ENTRY_COUNT_OFF 96   /* u64 */
#define WPK_H_RESERVED_OFF 104     /* 16 bytes, zero */
#define WPK_H_RESERVED_LEN 16
#define WPK_H_CHECKSUM_OFF 120     /* u64 XXH3-64 of bytes 0..119 */

/* Required feature bits. 1.1: some entry is zstd-compressed (codec 1). */
#define WPK_FEATURE_ZSTD (1ull << 0)
/* 1.1: external entries (kind 4) point into shard archives (a sharded set). */
#define WPK_FEATURE_SHARDS (1ull << 1)
#define WPK_REQUIRED_KNOWN (WPK_FEATURE_ZSTD | WPK_FEATURE_SHARDS)
#define WPK_MAX_SHARDS 65536u
/* Optional feature bits. 1.2: some uncompressed data entries carry chunk
 * checksums (codec_param = log2 of the chunk size, entry bytes 72..79 =
 * aux offset of one XXH3-64 per chunk of the stored bytes). Readers that
 * do not know it lose nothing but the partial checks. */
#define WPK_OPT_CHUNK_SUMS (1ull << 0)
#define WPK_OPTIONAL_KNOWN WPK_OPT_CHUNK_SUMS

/* ---- zstd-compressed entries (codec 1, format 1.1) ----
 * codec_param = log2(chunk size), 12..26 (4 KiB..64 MiB: WPACK_MIN_CHUNK,
 * WPACK_MAX_CHUNK; above it a limit, WPACK_E_LIMIT). The stored bytes are the chunks in
 * order, each one zstd frame (or the raw chunk when it would not shrink).
 * aux holds: u64 XXH3-64 of the decoded bytes, then one u64 per chunk: the
 * end offset of the chunk's stored bytes relative to data_offset, with bit
 * 63 set when the chunk is stored raw. */
#define WPK_CHUNK_LOG2_MIN 12
#ifndef WPK_CHUNK_LOG2_MAX
#define WPK_CHUNK_LOG2_MAX 26   /* = WPACK_MAX_CHUNK; a fuzz build lowers it */
#endif
#define WPK_CHUNK_RAW (1ull << 63)

/* ---- index ---- */
#define WPK_INDEX_MAGIC "WPKINDX1"
#define WPK_INDEX_HEADER_SIZE 256u
#define WPK_I_MAGIC_OFF 0          /* 8 bytes */
#define WPK_I_HEADER_SIZE_OFF 8    /* u32, = 256 */
#define WPK_I_ENTRY_SIZE_OFF 12    /* u32, = 80 */
#define WPK_I_ENTRY_COUNT_OFF 16   /* u64 */
#define WPK_I_DATA_ENTRY_COUNT_OFF 24 /* u64: entries of kind data */
#define WPK_I_SECTIONS_OFF 32      /* WPK_SECTION_COUNT x {u64 offset, u64 length} */
#define WPK_I_RESERVED_OFF (32 + 16 * WPK_SECTION_COUNT)  /* zero to 256 */

/* Sections, in this order in the section table and in the index bytes.
 * Offsets are relative to the index start, multiples of 8, increasing,
 * non-overlapping, each after the previous one's end, all inside the index;
 * bytes between them are zero. */
enum {
    WPK_SEC_ENTRIES = 0,     /* entry_count x entry record, sorted by name */
    WPK_SEC_EXTENTS = 1,     /* data_entry_count x u32 entry numbers, by offset */
    WPK_SEC_DIMS = 2,        /* u64 dims, referenced by entries */
    WPK_SEC_STRINGS = 3,     /* UTF-8 strings, each followed by one NUL */
    WPK_SEC_AUX = 4,         /* bytes: fill values, arrays, stats values */
    WPK_SEC_DTYPES = 5,      /* block dtype records */
    WPK_SEC_METADATA = 6,    /* metadata records, sorted by key */
    WPK_SEC_NAMEMAP = 7,     /* name-map records, sorted by other name */
    WPK_SEC_STATS = 8,       /* stats records, sorted by (key, kind) */
    WPK_SECTION_COUNT = 9
};

/* ---- entry record (80 bytes) ---- */
#define WPK_ENTRY_SIZE 80u
#define WPK_E_NAME_OFF 0           /* u64 offset in strings */
#define WPK_E_NAME_LEN_OFF 8       /* u32 */
#define WPK_E_KIND_OFF 12          /* u8 */
#define WPK_E_DTYPE_OFF 13         /* u8 */
#define WPK_E_RANK_OFF 14          /* u8 */
#define WPK_E_CODEC_OFF 15         /* u8 */
#define WPK_E_DIMS_OFF 16          /* u64 index of the first dim in the dims section (in u64s) */
#define WPK_E_DATA_OFFSET_OFF 24   /* u64 absolute file offset */
#define WPK_E_STORED_LEN_OFF 32    /* u64 */
#define WPK_E_CHECKSUM_OFF 40      /* u64 XXH3-64 */
#define WPK_E_AUX_OFF 48           /* u64 offset in aux */
#define WPK_E_AUX_LEN_OFF 56       /* u64 */
#define WPK_E_TARGET_OFF 64        /* u32 alias target entry number */
#define WPK_E_CODEC_PARAM_OFF 68   /* u32 chunk size log2: zstd (1.1); chunk sums (1.2), else zero */
#define WPK_E_RESERVED_OFF 72      /* 8 bytes, zero; 1.2: aux offset of the chunk sums */
#define WPK_E_SUMS_OFF WPK_E_RESERVED_OFF

/* ---- block dtype record (40 bytes) ---- */
#define WPK_DTYPE_REC_SIZE 40u
#define WPK_D_NAME_OFF 0           /* u64 strings */
#define WPK_D_NAME_LEN_OFF 8       /* u32 */
#define WPK_D_BLOCK_ELEMS_OFF 12   /* u32 >= 1 */
#define WPK_D_BLOCK_BYTES_OFF 16   /* u32 >= 1 */
#define WPK_D_RESERVED_OFF 20      /* u32 zero */
#define WPK_D_PARAMS_OFF 24        /* u64 aux */
#define WPK_D_PARAMS_LEN_OFF 32    /* u64 */
#define WPK_MAX_BLOCK_DTYPES 128u

/* ---- metadata record (32 bytes) ---- */
#define WPK_META_REC_SIZE 32u
#define WPK_M_KEY_OFF 0            /* u64 strings */
#define WPK_M_KEY_LEN_OFF 8        /* u32 */
#define WPK_M_TYPE_OFF 12          /* u8 */
#define WPK_M_ELEM_TYPE_OFF 13     /* u8 (arrays), else 0 */
#define WPK_M_RESERVED_OFF 14      /* u16 zero */
#define WPK_M_VALUE_OFF 16         /* u64: i64 / f64 bits / bool / strings offset / aux offset */
#define WPK_M_COUNT_OFF 24         /* u64: bytes (string, bytes) or elements (array); 0 for scalars */

/* ---- name-map record (24 bytes) ---- */
#define WPK_NAMEMAP_REC_SIZE 24u
#define WPK_N_NAME_OFF 0           /* u64 strings */
#define WPK_N_NAME_LEN_OFF 8       /* u32 */
#define WPK_N_ENTRY_OFF 12         /* u32 entry number */
#define WPK_N_RESERVED_OFF 16      /* u64 zero */

/* ---- stats record (64 bytes) ---- */
#define WPK_STATS_REC_SIZE 64u
#define WPK_S_KEY_OFF 0            /* u64 strings */
#define WPK_S_KEY_LEN_OFF 8        /* u32 */
#define WPK_S_KIND_OFF 12          /* u8 */
#define WPK_S_GRAN_OFF 13          /* u8 */
#define WPK_S_RESERVED_OFF 14      /* u16 zero */
#define WPK_S_AXIS_OFF 16          /* u32 */
#define WPK_S_CHANNELS_OFF 20      /* u32 >= 1 */
#define WPK_S_COUNT_OFF 24         /* u64 */
#define WPK_S_VALUES_OFF 32        /* u64 aux: f64 min[C] max[C] absmax[C] mean[C] variance[C] */
#define WPK_S_HIST_BINS_OFF 40     /* u32 */
#define WPK_S_PCT_COUNT_OFF 44     /* u32 */
#define WPK_S_HIST_OFF 48          /* u64 aux: f64 edges[B+1] then u64 counts[B] */
#define WPK_S_PCT_OFF 56           /* u64 aux: (f64 q, f64 value) x P */

/* ---- limits a reader enforces (spec: Limits); a fuzz build lowers them ---- */
#ifndef WPK_LIMIT_ENTRIES
#define WPK_LIMIT_ENTRIES (1ull << 31)
#endif
#ifndef WPK_LIMIT_META
#define WPK_LIMIT_META (1ull << 20)
#endif
#ifndef WPK_LIMIT_STATS
#define WPK_LIMIT_STATS (1ull << 31)
#endif
#ifndef WPK_LIMIT_ARRAY
#define WPK_LIMIT_ARRAY (1ull << 32)       /* elements in one metadata array */
#endif
#ifndef WPK_LIMIT_HIST_BINS
#define WPK_LIMIT_HIST_BINS (1u << 20)
#endif
#ifndef WPK_LIMIT_CHANNELS
#define WPK_LIMIT_CHANNELS (1u << 24)
#endif
#ifndef WPK_LIMIT_PERCENTILES
#define WPK_LIMIT_PERCENTILES 1024u
#endif

#endif
