/* Which ops of the registry (include/tern/ops.def) the device runs, and how: the compiler family files' rule
 * arrays (rules.c, cc_rules_for) or the graph layer's expansions (graph_expand_has). One query over both layers,
 * so docs/ops.md and `tern ops` report what compile would do instead of a hand-kept list. */
#include "compiler/compile_internal.h"
#include "graph/graph_internal.h"
#include "graph/expand.h"

tern_op_device tern_op_device_support(tern_op_id id)
{
    if ((int)id <= TERN_GOP_UNKNOWN || (int)id >= TERN_GOP_COUNT)
        return TERN_OP_DEVICE_NONE;
    const cc_rule *r;
    if (cc_rules_for(id, &r, 1) > 0)
        return TERN_OP_DEVICE_RULE;
    return graph_expand_has((int)id) ? TERN_OP_DEVICE_EXPANSION : TERN_OP_DEVICE_NONE;
}
