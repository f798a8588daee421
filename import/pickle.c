/*
 * pickle.c - the restricted unpickler (see pickle.h). One pass over the
 * opcodes with a value stack, a mark stack and a memo; every read is bounds
 * checked and every callable is interpreted here from a fixed whitelist.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "internal.h"
#include "pickle.h"

#define CHUNK_VALUES 4096

typedef struct chunk {
    struct chunk *next;
    size_t used;
    pk_value v[CHUNK_VALUES];
} chunk;

struct pk_state {
    const uint8_t *buf;
    size_t len, pos, op_pos;
    chunk *chunks;
    size_t nvalues;
    pk_value **stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    pk_value **memo;
    size_t memo_cap, memo_count; /* slots, filled slots (MEMOIZE's next index) */
    size_t memo_limit;           /* highest memo index + 1 this pickle may use */
    uint64_t refs, max_refs;     /* items held by all containers, and the budget */
    uint64_t mem, max_mem;       /* bytes allocated, and the budget */
    char *err;
    size_t errlen;
    int code;
};

static int perr(pk_state *st, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(pk_state *st, int code, const char *fmt, ...)
{
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    wpk_vfmt(m, sizeof m, fmt, ap);
    va_end(ap);
    wpk_fmt(st->err, st->errlen, "pickle: %s (opcode at byte %zu)", m, st->op_pos);
    st->code = code;
    return code;
}

/* Count n more bytes against the memory budget (before allocating them). */
static int charge(pk_state *st, size_t n)
{
    st->mem += n;
    if (st->mem > st->max_mem)
        return perr(st, WPACK_E_LIMIT,
                    "parsing needs more than %llu bytes of memory (%u per byte of this "
                    "%zu-byte pickle, at least %u): too many values for its size",
                    (unsigned long long)st->max_mem, WPK_PICKLE_MEM_PER_BYTE, st->len,
                    WPK_PICKLE_MEM_FLOOR);
    return WPACK_OK;
}

static pk_value *new_value(pk_state *st, pk_kind kind)
{
    if (st->nvalues >= WPK_PICKLE_MAX_VALUES) {
        perr(st, WPACK_E_LIMIT, "more than %u values", WPK_PICKLE_MAX_VALUES);
        return NULL;
    }
    if (!st->chunks || st->chunks->used == CHUNK_VALUES) {
        if (charge(st, sizeof(chunk)))
            return NULL;
        chunk *c = malloc(sizeof *c);
        if (!c) {
            perr(st, WPACK_E_NOMEM, "out of memory");
            return NULL;
        }
        c->next = st->chunks;
        c->used = 0;
        st->chunks = c;
    }
    pk_value *v = &st->chunks->v[st->chunks->used++];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    st->nvalues++;
    return v;
}

/* POP of a value that nothing but its stack slot holds and that was the
 * last one made (`]0`, `N0`): its slot is reused, so a pickle that pushes
 * and pops again and again stays small. */
static void release(pk_state *st, pk_value *v)
{
    chunk *c = st->chunks;
    if (v->shared || !c || !c->used || v != &c->v[c->used - 1])
        return;
    if (v->kind == PK_TENSOR) {
        if (v->view)
            st->mem -= sizeof *v->view;
        free(v->view);
    } else {
        st->mem -= (uint64_t)v->cap * sizeof *v->items;
        free(v->items);
    }
    c->used--;
    st->nvalues--;
}

static int push(pk_state *st, pk_value *v)
{
    if (!v)
        return st->code;
    if (st->sp == st->scap) {
        if (st->scap >= WPK_PICKLE_MAX_STACK)
            return perr(st, WPACK_E_LIMIT, "stack deeper than %u", WPK_PICKLE_MAX_STACK);
        size_t cap = st->scap ? st->scap * 2 : 64;
        if (charge(st, (cap - st->scap) * sizeof *st->stack))
            return st->code;
        pk_value **s = realloc(st->stack, cap * sizeof *s);
        if (!s)
            return perr(st, WPACK_E_NOMEM, "out of memory");
        st->stack = s;
        st->scap = cap;
    }
    st->stack[st->sp++] = v;
    return WPACK_OK;
}

/* The stack floor: values below the innermost mark are not poppable. */
static size_t floor_of(const pk_state *st)
{
    return st->nmarks ? st->marks[st->nmarks - 1] : 0;
}

static pk_value *pop(pk_state *st)
{
    if (st->sp <= floor_of(st)) {
        perr(st, WPACK_E_INPUT, "stack underflow");
        return NULL;
    }
    return st->stack[--st->sp];
}

static pk_value *top(pk_state *st)
{
    if (st->sp <= floor_of(st)) {
        perr(st, WPACK_E_INPUT, "stack underflow");
        return NULL;
    }
    return st->stack[st->sp - 1];
}

static int add_item(pk_state *st, pk_value *c, pk_value *item)
{
    if (++st->refs > st->max_refs)
        return perr(st, WPACK_E_LIMIT,
                    "containers would hold more than %llu items (%u per byte of this %zu-byte "
                    "pickle, at least %u): one list copied into OrderedDict again and again?",
                    (unsigned long long)st->max_refs, WPK_PICKLE_REFS_PER_BYTE, st->len,
                    WPK_PICKLE_REFS_FLOOR);
    if (c->n == c->cap) {
        if (c->cap >= UINT32_MAX / 2)
            return perr(st, WPACK_E_LIMIT, "a container with more than %u items", c->cap);
        uint32_t cap = c->cap ? c->cap * 2 : 4;
        if (charge(st, (cap - c->cap) * sizeof *c->items))
            return st->code;
        pk_value **v = realloc(c->items, cap * sizeof *v);
        if (!v)
            return perr(st, WPACK_E_NOMEM, "out of memory");
        c->items = v;
        c->cap = cap;
    }
    c->items[c->n++] = item;
    item->shared = 1;
    return WPACK_OK;
}

/* Pop everything above the innermost mark (and the mark) into *first, *n. */
static int pop_mark(pk_state *st, pk_value ***first, size_t *n)
{
    if (!st->nmarks)
        return perr(st, WPACK_E_INPUT, "no mark on the stack");
    size_t m = st->marks[--st->nmarks];
    /* An empty mark before anything was pushed: the stack is still NULL. */
    *first = st->stack ? st->stack + m : NULL;
    *n = st->sp - m;
    st->sp = m;
    return WPACK_OK;
}

static int need(pk_state *st, size_t n)
{
    if (n > st->len - st->pos)
        return perr(st, WPACK_E_INPUT, "truncated: %zu bytes needed, %zu left", n,
                    st->len - st->pos);
    return WPACK_OK;
}

static int make_tuple(pk_state *st, pk_value **items, size_t n)
{
    pk_value *t = new_value(st, PK_TUPLE);
    if (!t)
        return st->code;
    for (size_t i = 0; i < n; i++)
        if (add_item(st, t, items[i]))
            return st->code;
    return push(st, t);
}

static int memo_put(pk_state *st, uint64_t idx)
{
    pk_value *v = top(st);
    if (!v)
        return st->code;
    if (idx >= st->memo_limit)
        return perr(st, WPACK_E_LIMIT,
                    "memo index %llu above the %zu limit (the pickle's size + %u, at most %u)",
                    (unsigned long long)idx, st->memo_limit, WPK_PICKLE_MEMO_SLACK,
                    WPK_PICKLE_MAX_MEMO);
    if (idx >= st->memo_cap) {
        size_t cap = st->memo_cap ? st->memo_cap : 64;
        while (cap <= idx)
            cap *= 2;
        if (charge(st, (cap - st->memo_cap) * sizeof *st->memo))
            return st->code;
        pk_value **m = realloc(st->memo, cap * sizeof *m);
        if (!m)
            return perr(st, WPACK_E_NOMEM, "out of memory");
        memset(m + st->memo_cap, 0, (cap - st->memo_cap) * sizeof *m);
        st->memo = m;
        st->memo_cap = cap;
    }
    st->memo_count += !st->memo[idx];
    st->memo[idx] = v;
    v->shared = 1;
    return WPACK_OK;
}

static int memo_get(pk_state *st, uint64_t idx)
{
    if (idx >= st->memo_cap || !st->memo[idx])
        return perr(st, WPACK_E_INPUT, "memo slot %llu is empty", (unsigned long long)idx);
    return push(st, st->memo[idx]);
}

static int push_string(pk_state *st, pk_kind kind, uint64_t n)
{
    if (n > WPK_PICKLE_MAX_STRING)
        return perr(st, WPACK_E_LIMIT, "a %llu-byte string (limit %u)", (unsigned long long)n,
                    WPK_PICKLE_MAX_STRING);
    if (need(st, (size_t)n))
        return st->code;
    pk_value *v = new_value(st, kind);
    if (!v)
        return st->code;
    v->s = (const char *)st->buf + st->pos;
    v->slen = (size_t)n;
    st->pos += (size_t)n;
    return push(st, v);
}

static int push_int(pk_state *st, int64_t i)
{
    pk_value *v = new_value(st, PK_INT);
    if (!v)
        return st->code;
    v->i = i;
    return push(st, v);
}

static int push_global(pk_state *st, const char *mod, size_t mlen, const char *name, size_t nlen)
{
    const pk_allowed_global *a = pk_allowed_global_find(mod, mlen, name, nlen);
    if (a) {
        pk_value *v = new_value(st, PK_GLOBAL);
        if (!v)
            return st->code;
        v->g = a->g;
        v->dtype = a->dtype;
        v->why = a->why;
        v->s = name;
        v->slen = nlen;
        return push(st, v);
    }
    char qm[200], qn[200];
    wpk_quote(qm, sizeof qm, mod, mlen);
    wpk_quote(qn, sizeof qn, name, nlen);
    return perr(st, WPACK_E_UNSUPPORTED,
                "global '%s.%s' is not allowed (only collections.OrderedDict, "
                "torch._utils._rebuild_tensor_v2/_rebuild_parameter and torch.*Storage are; "
                "nothing is ever executed)",
                qm, qn);
}

static int op_global(pk_state *st)
{
    const uint8_t *p = st->buf + st->pos, *end = st->buf + st->len;
    const uint8_t *nl1 = memchr(p, '\n', (size_t)(end - p));
    if (!nl1)
        return perr(st, WPACK_E_INPUT, "GLOBAL without a newline");
    const uint8_t *nl2 = memchr(nl1 + 1, '\n', (size_t)(end - nl1 - 1));
    if (!nl2)
        return perr(st, WPACK_E_INPUT, "GLOBAL without a second newline");
    st->pos = (size_t)(nl2 + 1 - st->buf);
    return push_global(st, (const char *)p, (size_t)(nl1 - p), (const char *)nl1 + 1,
                       (size_t)(nl2 - nl1 - 1));
}

static int op_stack_global(pk_state *st)
{
    pk_value *name = pop(st), *mod = name ? pop(st) : NULL;
    if (!mod)
        return st->code;
    if (mod->kind != PK_STR || name->kind != PK_STR)
        return perr(st, WPACK_E_INPUT, "STACK_GLOBAL needs two strings");
    return push_global(st, mod->s, mod->slen, name->s, name->slen);
}

static int int_tuple(pk_state *st, const pk_value *t, uint64_t *out, const char *what)
{
    if (t->kind != PK_TUPLE)
        return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2: %s is not a tuple", what);
    if (t->n > WPACK_MAX_RANK)
        return perr(st, WPACK_E_UNSUPPORTED, "_rebuild_tensor_v2: rank %u above the %d limit",
                    t->n, WPACK_MAX_RANK);
    for (size_t k = 0; k < t->n; k++) {
        if (t->items[k]->kind != PK_INT || t->items[k]->i < 0)
            return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2: %s[%zu] is not an int >= 0", what,
                        k);
        out[k] = (uint64_t)t->items[k]->i;
    }
    return WPACK_OK;
}

static int call(pk_state *st, pk_value *fn, pk_value *args)
{
    if (fn->kind != PK_GLOBAL)
        return perr(st, WPACK_E_UNSUPPORTED, "REDUCE on something that is not a known global");
    if (args->kind != PK_TUPLE)
        return perr(st, WPACK_E_INPUT, "REDUCE arguments are not a tuple");
    pk_value **a = args->items;
    switch (fn->g) {
    case PKG_ORDERED_DICT: {
        pk_value *d = new_value(st, PK_DICT);
        if (!d)
            return st->code;
        if (args->n > 1)
            return perr(st, WPACK_E_UNSUPPORTED, "OrderedDict with %u arguments", args->n);
        if (args->n == 1) { /* OrderedDict([(k, v), ...]) */
            pk_value *l = a[0];
            if (l->kind != PK_LIST && l->kind != PK_TUPLE)
                return perr(st, WPACK_E_UNSUPPORTED, "OrderedDict of something not a list");
            for (size_t k = 0; k < l->n; k++) {
                pk_value *pair = l->items[k];
                if (pair->kind != PK_TUPLE || pair->n != 2)
                    return perr(st, WPACK_E_INPUT, "OrderedDict item %zu is not a pair", k);
                if (add_item(st, d, pair->items[0]) || add_item(st, d, pair->items[1]))
                    return st->code;
            }
        }
        return push(st, d);
    }
    case PKG_REBUILD_TENSOR_V2: {
        if (args->n != 6 && args->n != 7)
            return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2 with %u arguments (want 6 or 7)",
                        args->n);
        if (a[0]->kind != PK_STORAGE)
            return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2: argument 1 is not a storage");
        if (a[1]->kind != PK_INT || a[1]->i < 0)
            return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2: storage offset is not an int >= 0");
        pk_value *t = new_value(st, PK_TENSOR);
        if (!t)
            return st->code;
        if (charge(st, sizeof *t->view))
            return st->code;
        if (!(t->view = calloc(1, sizeof *t->view)))
            return perr(st, WPACK_E_NOMEM, "out of memory");
        pk_view *vw = t->view;
        vw->storage = a[0];
        a[0]->shared = 1;
        t->dtype = a[0]->dtype;
        t->why = a[0]->why;
        vw->offset = (uint64_t)a[1]->i;
        if (int_tuple(st, a[2], vw->dims, "size") || int_tuple(st, a[3], vw->strides, "stride"))
            return st->code;
        if (a[2]->n != a[3]->n)
            return perr(st, WPACK_E_INPUT, "_rebuild_tensor_v2: %u sizes but %u strides",
                        a[2]->n, a[3]->n);
        vw->rank = (unsigned)a[2]->n;
        return push(st, t);
    }
    case PKG_REBUILD_QTENSOR: {
        /* (storage, offset, size, stride, qparams, ...): only its kind matters */
        pk_value *t = new_value(st, PK_TENSOR);
        if (!t)
            return st->code;
        t->why = "quantized";
        return push(st, t);
    }
    case PKG_CODECS_ENCODE: {
        /* bytes in protocol 2: _codecs.encode('<latin-1 text>', 'latin1') */
        if (args->n != 2 || a[0]->kind != PK_STR || a[1]->kind != PK_STR)
            return perr(st, WPACK_E_UNSUPPORTED, "_codecs.encode: want (str, encoding)");
        pk_value *b = new_value(st, PK_BYTES);
        if (!b)
            return st->code;
        b->s = a[0]->s; /* the text, not the bytes: a bytes value is only ever skipped */
        b->slen = a[0]->slen;
        return push(st, b);
    }
    case PKG_REBUILD_PARAMETER:
        if (args->n != 3 || a[0]->kind != PK_TENSOR)
            return perr(st, WPACK_E_INPUT, "_rebuild_parameter: want (tensor, requires_grad, hooks)");
        a[0]->shared = 1;
        return push(st, a[0]);
    case PKG_STORAGE_TYPE:
    case PKG_QSCHEME:
    default:
        return perr(st, WPACK_E_UNSUPPORTED, "calling torch.%.*s is not allowed", (int)fn->slen,
                    fn->s);
    }
}

static int persistent_load(pk_state *st, pk_value *pid)
{
    if (pid->kind != PK_TUPLE || pid->n != 5 || pid->items[0]->kind != PK_STR ||
        pid->items[0]->slen != 7 || memcmp(pid->items[0]->s, "storage", 7) != 0)
        return perr(st, WPACK_E_UNSUPPORTED,
                    "persistent id is not ('storage', type, key, location, numel)");
    pk_value **a = pid->items;
    if (a[1]->kind != PK_GLOBAL || a[1]->g != PKG_STORAGE_TYPE)
        return perr(st, WPACK_E_UNSUPPORTED, "persistent id: storage type is not a torch.*Storage");
    if (a[2]->kind != PK_STR || a[3]->kind != PK_STR)
        return perr(st, WPACK_E_INPUT, "persistent id: key and location must be strings");
    if (a[4]->kind != PK_INT || a[4]->i < 0)
        return perr(st, WPACK_E_INPUT, "persistent id: numel is not an int >= 0");
    pk_value *s = new_value(st, PK_STORAGE);
    if (!s)
        return st->code;
    s->dtype = a[1]->dtype;
    s->why = a[1]->why;
    s->s = a[2]->s;
    s->slen = a[2]->slen;
    s->i = a[4]->i;
    return push(st, s);
}

static int64_t le_signed(const uint8_t *p, size_t n)
{
    uint64_t u = 0;
    for (size_t k = 0; k < n; k++)
        u |= (uint64_t)p[k] << (8 * k);
    if (n && n < 8 && (p[n - 1] & 0x80))
        u |= ~(uint64_t)0 << (8 * n);
    return (int64_t)u;
}

/* An n-byte two's complement int (LONG1, LONG4): an int64 when it fits
 * (the bytes past the eighth only extend its sign), else an opaque value. */
static int push_long(pk_state *st, size_t n)
{
    if (need(st, n))
        return st->code;
    const uint8_t *p = st->buf + st->pos;
    st->pos += n;
    if (n <= 8)
        return push_int(st, le_signed(p, n));
    uint8_t ext = (p[7] & 0x80) ? 0xff : 0x00;
    for (size_t k = 8; k < n; k++)
        if (p[k] != ext) {
            pk_value *v = new_value(st, PK_OPAQUE);
            if (!v)
                return st->code;
            v->why = "an int outside 64 bits";
            return push(st, v);
        }
    return push_int(st, le_signed(p, 8));
}

static int step(pk_state *st, int *done)
{
    uint8_t op = st->buf[st->pos++];
    pk_value *v, *k, **items = NULL;
    size_t n = 0;
    switch (op) {
    case 0x80: /* PROTO */
        if (need(st, 1))
            return st->code;
        if (st->buf[st->pos] > 5)
            return perr(st, WPACK_E_UNSUPPORTED, "pickle protocol %u", st->buf[st->pos]);
        st->pos++;
        return WPACK_OK;
    case 0x95: /* FRAME: just a length hint */
        if (need(st, 8))
            return st->code;
        st->pos += 8;
        return WPACK_OK;
    case '}':
        return push(st, new_value(st, PK_DICT));
    case ']':
        return push(st, new_value(st, PK_LIST));
    case ')':
        return push(st, new_value(st, PK_TUPLE));
    case '(':
        if (st->nmarks == st->mcap) {
            if (st->mcap >= WPK_PICKLE_MAX_STACK)
                return perr(st, WPACK_E_LIMIT, "more than %u marks", WPK_PICKLE_MAX_STACK);
            size_t cap = st->mcap ? st->mcap * 2 : 16;
            if (charge(st, (cap - st->mcap) * sizeof *st->marks))
                return st->code;
            size_t *m = realloc(st->marks, cap * sizeof *m);
            if (!m)
                return perr(st, WPACK_E_NOMEM, "out of memory");
            st->marks = m;
            st->mcap = cap;
        }
        st->marks[st->nmarks++] = st->sp;
        return WPACK_OK;
    case 'X': /* BINUNICODE */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        return push_string(st, PK_STR, wpk_ld32(st->buf + st->pos - 4));
    case 0x8c: /* SHORT_BINUNICODE */
        if (need(st, 1))
            return st->code;
        st->pos += 1;
        return push_string(st, PK_STR, st->buf[st->pos - 1]);
    case 0x8d: /* BINUNICODE8 */
        if (need(st, 8))
            return st->code;
        st->pos += 8;
        return push_string(st, PK_STR, wpk_ld64(st->buf + st->pos - 8));
    case 'B': /* BINBYTES */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        return push_string(st, PK_BYTES, wpk_ld32(st->buf + st->pos - 4));
    case 'C': /* SHORT_BINBYTES */
        if (need(st, 1))
            return st->code;
        st->pos += 1;
        return push_string(st, PK_BYTES, st->buf[st->pos - 1]);
    case 'J': /* BININT */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        return push_int(st, (int32_t)wpk_ld32(st->buf + st->pos - 4));
    case 'K': /* BININT1 */
        if (need(st, 1))
            return st->code;
        return push_int(st, st->buf[st->pos++]);
    case 'M': /* BININT2 */
        if (need(st, 2))
            return st->code;
        st->pos += 2;
        return push_int(st, wpk_ld16(st->buf + st->pos - 2));
    case 0x8a: /* LONG1 */
        if (need(st, 1))
            return st->code;
        n = st->buf[st->pos++];
        return push_long(st, n);
    case 0x8b: /* LONG4 */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        if ((int32_t)wpk_ld32(st->buf + st->pos - 4) < 0)
            return perr(st, WPACK_E_INPUT, "LONG4 with a negative length");
        return push_long(st, wpk_ld32(st->buf + st->pos - 4));
    case 'G': { /* BINFLOAT: big-endian double */
        if (need(st, 8))
            return st->code;
        uint64_t u = 0;
        for (int b = 0; b < 8; b++)
            u = u << 8 | st->buf[st->pos + (size_t)b];
        st->pos += 8;
        v = new_value(st, PK_FLOAT);
        if (!v)
            return st->code;
        memcpy(&v->f, &u, sizeof v->f);
        return push(st, v);
    }
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        v = new_value(st, PK_BOOL);
        if (!v)
            return st->code;
        v->i = op == 0x88;
        return push(st, v);
    case 'N':
        return push(st, new_value(st, PK_NONE));
    case 't': /* TUPLE */
        if (pop_mark(st, &items, &n))
            return st->code;
        return make_tuple(st, items, n);
    case 0x85: /* TUPLE1..3 */
    case 0x86:
    case 0x87:
        n = (size_t)(op - 0x84);
        if (st->sp < floor_of(st) + n)
            return perr(st, WPACK_E_INPUT, "stack underflow");
        st->sp -= n;
        return make_tuple(st, st->stack + st->sp, n);
    case 's': /* SETITEM */
        v = pop(st);
        k = v ? pop(st) : NULL;
        if (!k || !top(st))
            return st->code;
        if (top(st)->kind != PK_DICT)
            return perr(st, WPACK_E_INPUT, "SETITEM on something that is not a dict");
        if (add_item(st, top(st), k))
            return st->code;
        return add_item(st, top(st), v);
    case 'u': /* SETITEMS */
        if (pop_mark(st, &items, &n))
            return st->code;
        if (!(v = top(st)))
            return st->code;
        if (v->kind != PK_DICT || n % 2)
            return perr(st, WPACK_E_INPUT, "SETITEMS needs a dict and key/value pairs");
        for (size_t j = 0; j < n; j++)
            if (add_item(st, v, items[j]))
                return st->code;
        return WPACK_OK;
    case 'a': /* APPEND */
        k = pop(st);
        if (!k || !(v = top(st)))
            return st->code;
        if (v->kind != PK_LIST)
            return perr(st, WPACK_E_INPUT, "APPEND to something that is not a list");
        return add_item(st, v, k);
    case 'e': /* APPENDS */
        if (pop_mark(st, &items, &n))
            return st->code;
        if (!(v = top(st)))
            return st->code;
        if (v->kind != PK_LIST)
            return perr(st, WPACK_E_INPUT, "APPENDS to something that is not a list");
        for (size_t j = 0; j < n; j++)
            if (add_item(st, v, items[j]))
                return st->code;
        return WPACK_OK;
    case 'q': /* BINPUT */
        if (need(st, 1))
            return st->code;
        return memo_put(st, st->buf[st->pos++]);
    case 'r': /* LONG_BINPUT */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        return memo_put(st, wpk_ld32(st->buf + st->pos - 4));
    case 0x94: /* MEMOIZE */
        return memo_put(st, st->memo_count);
    case 'h': /* BINGET */
        if (need(st, 1))
            return st->code;
        return memo_get(st, st->buf[st->pos++]);
    case 'j': /* LONG_BINGET */
        if (need(st, 4))
            return st->code;
        st->pos += 4;
        return memo_get(st, wpk_ld32(st->buf + st->pos - 4));
    case 'c':
        return op_global(st);
    case 0x93:
        return op_stack_global(st);
    case 'R': /* REDUCE */
        v = pop(st);
        k = v ? pop(st) : NULL;
        if (!k)
            return st->code;
        return call(st, k, v);
    case 'b': /* BUILD: state of an OrderedDict (_metadata) or tensor: not needed */
        v = pop(st);
        if (!v || !(k = top(st)))
            return st->code;
        if (k->kind != PK_DICT && k->kind != PK_TENSOR)
            return perr(st, WPACK_E_UNSUPPORTED, "BUILD on something that is not a dict or tensor");
        return WPACK_OK;
    case 'Q': /* BINPERSID */
        if (!(v = pop(st)))
            return st->code;
        return persistent_load(st, v);
    case '0': /* POP */
        if (!(v = pop(st)))
            return st->code;
        release(st, v);
        return WPACK_OK;
    case '2': /* DUP */
        if (!(v = top(st)))
            return st->code;
        v->shared = 1;
        return push(st, v);
    case '1': /* POP_MARK */
        if (pop_mark(st, &items, &n))
            return st->code;
        while (n)
            release(st, items[--n]);
        return WPACK_OK;
    case '.': /* STOP */
        *done = 1;
        return WPACK_OK;
    default:
        return perr(st, WPACK_E_UNSUPPORTED, "opcode 0x%02x ('%c') is not supported", op,
                    op >= 0x20 && op < 0x7f ? op : '?');
    }
}

int pk_load(const uint8_t *buf, size_t len, pk_state **out, pk_value **root, char *err,
            size_t errlen)
{
    *root = NULL;
    pk_state *st = calloc(1, sizeof *st);
    *out = st;
    if (!st) {
        wpk_fmt(err, errlen, "pickle: out of memory");
        return WPACK_E_NOMEM;
    }
    st->buf = buf;
    st->len = len;
    st->err = err;
    st->errlen = errlen;
    st->memo_limit = len < WPK_PICKLE_MAX_MEMO - WPK_PICKLE_MEMO_SLACK
                         ? len + WPK_PICKLE_MEMO_SLACK : WPK_PICKLE_MAX_MEMO;
    st->max_refs = (uint64_t)len * WPK_PICKLE_REFS_PER_BYTE + WPK_PICKLE_REFS_FLOOR;
    st->max_mem = (uint64_t)len * WPK_PICKLE_MEM_PER_BYTE + WPK_PICKLE_MEM_FLOOR;
    int done = 0;
    while (!done) {
        if (st->pos >= st->len) {
            st->op_pos = st->pos;
            return perr(st, WPACK_E_INPUT, "truncated: no STOP opcode");
        }
        st->op_pos = st->pos;
        int rc = step(st, &done);
        if (rc)
            return rc;
    }
    if (st->sp != 1 || st->nmarks)
        return perr(st, WPACK_E_INPUT, "STOP with %zu values and %zu marks on the stack", st->sp,
                    st->nmarks);
    *root = st->stack[0];
    return WPACK_OK;
}

void pk_free(pk_state *st)
{
    if (!st)
        return;
    for (chunk *c = st->chunks, *next; c; c = next) {
        next = c->next;
        for (size_t i = 0; i < c->used; i++) {
            if (c->v[i].kind == PK_TENSOR)
                free(c->v[i].view);
            else
                free(c->v[i].items); /* NULL but for tuples, lists and dicts */
        }
        free(c);
    }
    free(st->stack);
    free(st->marks);
    free(st->memo);
    free(st);
}
