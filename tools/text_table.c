/*
 * text_table.c - aligned text columns (text_table.h).
 */
#include "text_table.h"

#include <stdlib.h>
#include <string.h>

void text_table_init(text_table *t, size_t ncols)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols > TEXT_TABLE_MAX_COLS ? TEXT_TABLE_MAX_COLS : ncols;
}

static char *dup_cell(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) return NULL;
    /* A control character in a name must not break the layout. */
    for (size_t i = 0; i < n; i++)
        d[i] = ((unsigned char)s[i] < 0x20 && s[i]) || s[i] == 0x7f ? '?' : s[i];
    return d;
}

void text_table_row(text_table *t, const char *const *cells)
{
    if (t->failed || t->ncols == 0) return;
    if (t->rows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **nc = realloc(t->cells, cap * t->ncols * sizeof *nc);
        if (!nc) {
            t->failed = true;
            return;
        }
        t->cells = nc;
        t->cap = cap;
    }
    char **row = &t->cells[t->rows * t->ncols];
    for (size_t c = 0; c < t->ncols; c++) {
        row[c] = dup_cell(cells[c]);
        if (!row[c]) {
            for (size_t k = 0; k < c; k++) free(row[k]);
            t->failed = true;
            return;
        }
    }
    t->rows++;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80) w++;
    return w;
}

static void pad(FILE *f, size_t n)
{
    while (n--) fputc(' ', f);
}

void text_table_print(const text_table *t, FILE *f, int indent)
{
    size_t w[TEXT_TABLE_MAX_COLS] = {0};
    for (size_t r = 0; r < t->rows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t cw = width(t->cells[r * t->ncols + c]);
            if (cw > w[c]) w[c] = cw;
        }
    for (size_t r = 0; r < t->rows; r++) {
        char *const *row = &t->cells[r * t->ncols];
        /* Stop after the last non-empty cell: no trailing blanks. */
        size_t end = t->ncols;
        while (end > 0 && row[end - 1][0] == '\0') end--;
        pad(f, indent > 0 ? (size_t)indent : 0);
        for (size_t c = 0; c < end; c++) {
            size_t cw = width(row[c]);
            bool last = c + 1 == end;
            if (t->right[c]) pad(f, w[c] - cw);
            fputs(row[c], f);
            if (!last) {
                if (!t->right[c]) pad(f, w[c] - cw);
                fputs("  ", f);
            }
        }
        fputc('\n', f);
    }
    if (t->failed) fputs("  (out of memory: table truncated)\n", f);
}

void text_table_free(text_table *t)
{
    for (size_t i = 0; i < t->rows * t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}
