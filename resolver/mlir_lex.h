/*
 * mlir_lex.h - the MLIR tokenizer under the scanner: strings (with \" \\ \n
 * \t and \XX hex escapes), comments, identifiers of every sigil, numbers,
 * punctuation, '->' and the {-# #-} brackets of the file metadata.
 */
#ifndef WPACK_RESOLVER_MLIR_LEX_H
#define WPACK_RESOLVER_MLIR_LEX_H

#include <stddef.h>

enum {
    WPK_TOK_EOF = 0,
    WPK_TOK_ERROR,
    WPK_TOK_BAREID,     /* module, ml_program.global, tensor, f32, x3xf32 */
    WPK_TOK_STRING,     /* "..." including quotes */
    WPK_TOK_AT,         /* @sym or @"sym" */
    WPK_TOK_HASH,       /* #alias, #dialect.attr */
    WPK_TOK_BANG,       /* !alias, !dialect.type */
    WPK_TOK_PERCENT,    /* %value, %0#1 */
    WPK_TOK_CARET,      /* ^block */
    WPK_TOK_NUMBER,     /* 12, 0x1F, 1.5e-3 */
    WPK_TOK_PUNCT,      /* one of ( ) [ ] { } < > : , = ? * + - | etc. */
    WPK_TOK_ARROW,      /* -> */
    WPK_TOK_META_BEGIN, /* {-# */
    WPK_TOK_META_END    /* #-} */
};

/* Character classes of wpk_char_class[] (bits). */
enum {
    WPK_C_ID_START = 1,  /* [A-Za-z_] */
    WPK_C_ID = 2,        /* bare-id continuation: [A-Za-z0-9_$.] */
    WPK_C_SUFFIX = 4,    /* suffix-id (after # ! % ^ @): WPK_C_ID or '-' */
    WPK_C_SPACE = 8,     /* ' ' \t \n \r (MLIR's blanks: not \f \v) */
    WPK_C_DIGIT = 16,    /* [0-9] */
    WPK_C_HEX = 32       /* [0-9A-Fa-f] */
};
extern const unsigned char wpk_char_class[256];

typedef struct wpk_tok {
    int kind;
    size_t off, len;
} wpk_tok;

typedef struct wpk_lexer {
    const char *buf;
    size_t len, pos;
    const char *err;    /* static message when a token is WPK_TOK_ERROR */
    size_t err_off;
    /* the token wpk_lex_peek() read at peek_at (ends at peek_end), so that
     * the wpk_lex_next() after a peek does not lex it again */
    int has_peek;
    size_t peek_at, peek_end;
    wpk_tok peek;
} wpk_lexer;

void wpk_lex_init(wpk_lexer *lx, const char *buf, size_t len, size_t pos);
/* The next token; whitespace and // comments are skipped. */
wpk_tok wpk_lex_next(wpk_lexer *lx);
/* The next token without consuming it (remembered for the next call). */
wpk_tok wpk_lex_peek(wpk_lexer *lx);
/* Is tok the single punctuation character c? */
int wpk_tok_is(const wpk_lexer *lx, wpk_tok tok, char c);

/* How many of the n bytes at p, from the start, are hex digits (16 bytes
 * a step: gigabyte resource blobs are checked at memory speed). */
size_t wpk_hex_run(const char *p, size_t n);

/* A resource blob "0x<hex digits>" at the next token, read in one pass
 * over its digits: 1 and *tok (a WPK_TOK_STRING whose digits are all hex)
 * when the string is exactly that, 0 otherwise (nothing consumed; lex it
 * with wpk_lex_next for the general string rules and their errors). */
int wpk_lex_hex_blob(wpk_lexer *lx, wpk_tok *tok);

#endif
