/* Lowerings of convolutional-network ops: Conv, MaxPool, AveragePool, GlobalAveragePool, BatchNormalization.
 * (None yet: the graph fails to compile with "not supported" for these.) */
#include <string.h>

#include "compiler/compile_internal.h"

cc_lower_fn cc_lowering_cnn(const char *op)
{
    (void)op;
    return NULL;
}
