/* commands.h - the subcommands of the k3 CLI, one tools/cmd_*.c file each. Each takes
 * argv starting at its own name and returns the process exit status. */
#ifndef K3_COMMANDS_H
#define K3_COMMANDS_H

#include <stdio.h>

/* The usage text of main.c: the single source of truth for every command and option. */
void cli_usage(FILE *f);

/* `k3 MODEL_DIR ...`: load a model and decode (tools/run.c); argv[0] is MODEL_DIR. */
int run_main(int argc, char **argv);

/* `k3 bench MODEL_DIR ...`: memory bandwidth and decode speed side by side (cmd_bench.c). */
int bench_main(int argc, char **argv);

/* `k3 bench-scale MODEL_DIR ...`: per-layer time at full width against the memory and disk
 * limits measured in the same run (cmd_scale.c). */
int scale_main(int argc, char **argv);

/* `k3 bench-kernels ...`: the matrix kernels on K3's shapes against the memory bandwidth
 * (cmd_bench_kernels.c). */
int bench_kernels_main(int argc, char **argv);

/* `k3 forecast [MODEL_DIR] ...`: seconds per token forecast per preset from a machine
 * profile (cmd_forecast.c). */
int forecast_main(int argc, char **argv);

/* `k3 draft-replay ...`: the drafter against a known continuation (cmd_draft_replay.c). */
int draft_replay_main(int argc, char **argv);

/* `k3 serve MODEL_DIR ...`: the engine behind the OpenAI-compatible HTTP API (cmd_serve.c). */
int serve_main(int argc, char **argv);

/* `k3 tokenize --tok DIR ...` and `k3 detokenize --tok DIR --ids ...` (tools/cmd_tokenize.c). */
int tokenize_main(int argc, char **argv);
int detokenize_main(int argc, char **argv);

#endif
