/* Option parsing shared by every `tern` subcommand: the one rule for an option that needs a value, and strict
 * number parsers (the whole word consumed, range-checked) so `--dim 2abc` or `--seed abc` is a usage error naming
 * the option, the rule and the word instead of a silently different number. Each failure prints
 * "tern CMD: ..." to stderr and returns the usage exit code 2 (commands.h). */
#ifndef TERN_CLI_ARGS_H
#define TERN_CLI_ARGS_H

#include <stdint.h>

/* The value of option argv[*i] (argv[*i + 1]), advancing *i past it. When there is none - the option is the last
 * word, or the next word is itself an option ("-o", "--profile"; "-" alone and negative numbers are values) -
 * prints "tern CMD: OPT needs a value (WHAT)" and returns NULL without advancing. */
const char *tern_arg_value(const char *cmd, int argc, char **argv, int *i, const char *what);

/* Strict decimal integers: optional sign (none for the unsigned form), digits, nothing else, within [lo, hi].
 * Return 0 and set *out, or print "tern CMD: OPT expects an integer in [lo, hi], got 'S'" and return 2. */
int tern_arg_int(const char *cmd, const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int tern_arg_uint(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* Strict finite number (strtod syntax, the whole word), within [lo, hi]; same contract. */
int tern_arg_float(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);

#endif
