/* Lowerings of further ONNX ops beyond the transformer set of lower.c. (None yet.) */
#include <string.h>

#include "compiler/compile_internal.h"

cc_lower_fn cc_lowering_extra(const char *op)
{
    (void)op;
    return NULL;
}
