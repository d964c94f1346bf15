/* commands.h - the subcommands of the k3 CLI, one tools/cmd_*.c file each. Each takes
 * argv starting at its own name and returns the process exit status. */
#ifndef K3_COMMANDS_H
#define K3_COMMANDS_H

#endif
