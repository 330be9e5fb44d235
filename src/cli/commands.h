/* The `tern` CLI's subcommands. Each takes argv starting at the subcommand's own name and returns the
 * process exit code: 0 success, 1 a failure of the work (bad file, failed run), 2 a usage error (unknown
 * command, option or machine). Only the CLI prints to stdout/stderr on behalf of the user and exits. */
#ifndef TERN_CLI_COMMANDS_H
#define TERN_CLI_COMMANDS_H

int tern_cmd_info(int argc, char **argv);
int tern_cmd_asm(int argc, char **argv);    /* cmd_asm.c */
int tern_cmd_disasm(int argc, char **argv); /* cmd_asm.c */
int tern_cmd_kernel(int argc, char **argv);  /* cmd_kernel.c */
int tern_cmd_profile(int argc, char **argv); /* cmd_profile.c */
int tern_cmd_compile(int argc, char **argv); /* cmd_model.c */
int tern_cmd_run(int argc, char **argv);     /* cmd_model.c */
int tern_cmd_collective(int argc, char **argv); /* cmd_collective.c */
int tern_cmd_launch(int argc, char **argv);     /* cmd_launch.c */
int tern_cmd_plan(int argc, char **argv);       /* cmd_plan.c */
int tern_cmd_inspect(int argc, char **argv); /* cmd_inspect.c */
int tern_cmd_train(int argc, char **argv);   /* cmd_train.c */

int tern_cmd_ops(int argc, char **argv);     /* cmd_ops.c */
#endif
