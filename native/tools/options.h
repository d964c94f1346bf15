/* options.h - the option loop the CLI's commands share: each command describes its options
 * as a table (a flag, a text, a whole number or a real number in a range, and where the
 * value goes), the memory options of run_memory.h are tried first where the command takes
 * them, and every refusal reads the same way: the command, the option, the value and the
 * range. What the options mean is said once, in cli_usage() (main.c); options a table
 * cannot describe (lists, values checked against each other) stay with their command,
 * through the `custom` hook or after the loop. */
#ifndef K3_TOOLS_OPTIONS_H
#define K3_TOOLS_OPTIONS_H

#include "run_memory.h"

typedef enum option_kind {
    OPTION_FLAG,     /* no value: *(int *)target = 1 */
    OPTION_TEXT,     /* *(const char **)target = the value, as given */
    OPTION_INT,      /* *(int *)target = a whole number in [lo, hi] */
    OPTION_LONG,     /* *(long long *)target = a whole number in [lo, hi] (byte counts) */
    OPTION_REAL,     /* *(double *)target = a number in [lo, hi] */
    OPTION_POSITIVE  /* *(double *)target = a number in (0, hi] */
} option_kind;

typedef struct option {
    const char *name; /* "--threads" */
    option_kind kind;
    void *target;
    double lo, hi;
} option;

typedef struct option_parser {
    const char *command;      /* how messages begin: "k3", "k3 bench-scale" */
    const option *table;
    int n_table;
    run_memory *memory;       /* NULL: the command takes no memory options */
    const char *model_dir;    /* what --list-presets sizes "auto" for (NULL: the release) */
    /* May be NULL. For argv[*i] when it is neither a memory option nor in the table: returns
     * 1 after consuming it (and its value, advancing *i), 0 when it is not one either, or
     * 2 after saying why its value is bad. */
    int (*custom)(void *user, int argc, char **argv, int *i);
    void *user;
} option_parser;

/* Reads argv[first..argc) into the targets. Returns 0 to go on; -1 when --list-presets
 * printed the table (exit 0); 2 after saying why on stderr (an unknown option or a missing
 * value with the usage after it, a value out of range with the range). */
int options_parse(const option_parser *p, int argc, char **argv, int first);

/* Prints "command: <message>", a blank line and the usage on stderr; returns 2 (the exit
 * status of a command line that does not say what to do). */
int options_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
