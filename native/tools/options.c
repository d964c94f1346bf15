/* options.c - see options.h. */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

int options_usage_error(const char *command, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    cli_usage(stderr);
    return 2;
}
/* Stores v in o's target, or says why it cannot (returns 2). */
static int take_value(const option_parser *p, const option *o, const char *v) {
    if (o->kind == OPTION_TEXT) {
        *(const char **)o->target = v;
        return 0;
    }
    char *end;
    errno = 0;
    if (o->kind == OPTION_INT || o->kind == OPTION_LONG) {
        const long long n = strtoll(v, &end, 10);
        if (errno || end == v || *end || n < (long long)o->lo || n > (long long)o->hi) {
            fprintf(stderr, "%s: %s '%s': expected a whole number from %.0f to %.0f\n", p->command, o->name, v, o->lo,
                    o->hi);
            return 2;
        }
        if (o->kind == OPTION_LONG)
            *(long long *)o->target = n;
        else
            *(int *)o->target = (int)n;
        return 0;
    }
    const double x = strtod(v, &end);
    const int low_ok = o->kind == OPTION_POSITIVE ? x > 0.0 : x >= o->lo;
    if (errno || end == v || *end || !(low_ok && x <= o->hi)) {
        if (o->kind == OPTION_POSITIVE)
            fprintf(stderr, "%s: %s '%s': expected a number above 0, at most %g\n", p->command, o->name, v, o->hi);
        else
            fprintf(stderr, "%s: %s '%s': expected a number from %g to %g\n", p->command, o->name, v, o->lo, o->hi);
        return 2;
    }
    *(double *)o->target = x;
    return 0;
}

int options_parse(const option_parser *p, int argc, char **argv, int first) {
    for (int i = first; i < argc; i++) {
        if (p->memory) {
            const int mem = run_memory_option(p->memory, argc, argv, &i, p->model_dir);
            if (mem < 0)
                return 2;
            if (mem == 2)
                return -1;
            if (mem)
                continue;
        }
        const option *o = NULL;
        for (int k = 0; k < p->n_table && !o; k++)
            if (!strcmp(argv[i], p->table[k].name))
                o = &p->table[k];
        if (!o) {
            const int custom = p->custom ? p->custom(p->user, argc, argv, &i) : 0;
            if (custom == 1)
                continue;
            if (custom)
                return 2;
            return options_usage_error(p->command, "unknown option '%s'", argv[i]);
        }
        if (o->kind == OPTION_FLAG) {
            *(int *)o->target = 1;
            continue;
        }
        if (i + 1 >= argc)
            return options_usage_error(p->command, "a value is missing after '%s'", argv[i]);
        if (take_value(p, o, argv[++i]))
            return 2;
    }
    return 0;
}
