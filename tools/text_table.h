/*
 * text_table.h - aligned text columns for the CLI's human-readable output.
 *
 * Collect rows of cells, then print them with every column padded to its
 * widest cell; a row ends after its last non-empty cell, so no line has
 * trailing blanks. Cells are copied with control characters replaced by
 * '?' (a newline in a value name must not break the layout). Widths count
 * UTF-8 code points, so names with non-ASCII letters still align.
 *
 * Ownership: the table owns its copies; free with text_table_free. On
 * allocation failure the table remembers it and prints what it has plus a
 * note. Thread-safety: one table per thread.
 */
#ifndef TEEXEC_TOOLS_TEXT_TABLE_H
#define TEEXEC_TOOLS_TEXT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TEXT_TABLE_MAX_COLS 8

typedef struct text_table {
    size_t ncols;
    char **cells;      /* rows * ncols */
    size_t rows, cap;
    bool right[TEXT_TABLE_MAX_COLS]; /* right-align (numbers) */
    bool failed;
} text_table;

void text_table_init(text_table *t, size_t ncols);
/* Adds a row of ncols cells (NULL cells print empty). */
void text_table_row(text_table *t, const char *const *cells);
/* Prints each row indented by `indent` spaces. */
void text_table_print(const text_table *t, FILE *f, int indent);
void text_table_free(text_table *t);

#endif
