/* k3.c - the `k3` command-line tool: benchmarks and debugging on top of the engine.
 * usage() is the single source of truth for its commands and options; nothing else
 * lists them. Subcommands live in tools/cmd_*.c and are dispatched from the table below. */
#include "commands.h"
#include "k3.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "k3 %s, the Kimi K3 inference engine\n"
            "\n"
            "usage: k3 [options]\n"
            "       k3 COMMAND [options]\n"
            "\n"
            "options:\n"
            "  --version     print the engine version and exit\n"
            "  --help        print this text and exit\n",
            k3_version());
}

/* Subcommands: `k3 NAME ...` runs fn with argv starting at NAME. */
static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {NULL, NULL},
};

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] != '-')
        for (int c = 0; commands[c].name; c++)
            if (!strcmp(argv[1], commands[c].name))
                return commands[c].fn(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("k3 %s\n", k3_version());
            return 0;
        }
        fprintf(stderr, "k3: unknown option or command '%s'\n\n", argv[i]);
        usage(stderr);
        return 2;
    }
    usage(stderr);
    return 2;
}
