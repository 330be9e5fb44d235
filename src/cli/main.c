/* Entry point of the `tern` command: global options (--help, --version) and dispatch to subcommands.
 * Each subcommand lives in its own cmd_*.c file and documents its options in its own usage text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "tern/base.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", tern_cmd_info, "list the machine catalogue, or describe one machine (NAME [--json])"},
    {"compile", tern_cmd_compile, "compile an ONNX model into a tern executable (MODEL.onnx -o MODEL.tern)"},
    {"run", tern_cmd_run, "run an executable or ONNX model: outputs, predicted time, MFU (MODEL [--profile])"},
    {"asm", tern_cmd_asm, "assemble program text into a binary program (IN.s -o OUT.tprog)"},
    {"disasm", tern_cmd_disasm, "print a binary program as assembly text (IN.tprog [-o OUT.s])"},
    {"kernel", tern_cmd_kernel, "build a library kernel and save its program (gemm|softmax|layernorm ... -o FILE)"},
    {"inspect", tern_cmd_inspect, "describe a compiled executable: machine, I/O, instructions (MODEL.tern [--disasm])"},
    {"collective", tern_cmd_collective, "time collectives over chips, instances and clusters (all-reduce --machine trn1.32xlarge)"},
    {"launch", tern_cmd_launch, "run a program over N ranks, its collectives over the fabric (PROG.s --machine M --ranks N)"},
    {"plan", tern_cmd_plan, "plan a training job: layouts, step time, memory, cost (--model CFG.json --cluster 32xtrn1.32xlarge)"},
    {"train", tern_cmd_train, "train an ONNX model on the simulated device (MODEL.onnx --data X.npy --labels Y.npy)"},
    {"profile", tern_cmd_profile, "run a program with the profiler: summary, trace, SVG (PROGRAM [--trace F])"},
    {"ops", tern_cmd_ops, "list the ops tern knows: family, status, host and device support ([--markdown])"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tern [--help] [--version] <command> [args]\n"
            "\n"
            "tern is a software Trainium-class ML accelerator.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < TERN_ARRAY_LEN(commands); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun `tern <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("tern %s\n", tern_version());
        return 0;
    }
    for (size_t i = 0; i < TERN_ARRAY_LEN(commands); i++)
        if (!strcmp(cmd, commands[i].name)) {
            /* Only `tern collective`, `tern launch`, `tern run` (a batch split) and `tern train` (data parallelism)
             * spread over MPI processes; any other command started by mpirun with more than one process would run K
             * identical copies and print K times, so it is refused. */
            const char *np = getenv("OMPI_COMM_WORLD_SIZE");
            if (!np)
                np = getenv("PMI_SIZE");
            if (np && atoi(np) > 1 && strcmp(cmd, "collective") != 0 && strcmp(cmd, "launch") != 0 &&
                strcmp(cmd, "run") != 0 && strcmp(cmd, "train") != 0) {
                if (!getenv("OMPI_COMM_WORLD_RANK") || atoi(getenv("OMPI_COMM_WORLD_RANK")) == 0)
                    fprintf(stderr,
                            "tern %s: started by mpirun with %s processes, but only `tern collective`, `tern "
                            "launch`, `tern run` and `tern train` run over MPI processes; run tern %s without "
                            "mpirun\n",
                            cmd, np, cmd);
                return 1;
            }
            return commands[i].run(argc - 1, argv + 1);
        }
    if (cmd[0] == '-')
        fprintf(stderr, "tern: unknown option '%s'\n", cmd);
    else
        fprintf(stderr, "tern: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
