/* Private to the sim layer: the fabric constructor that takes the instance description separately from the
 * machine, so a cluster file (cluster.c) can hand it a copy with what-if overrides (link bandwidths, latencies,
 * topology) while the chip and core figures still come from the machine file. */
#ifndef TERN_SIM_FABRIC_INTERNAL_H
#define TERN_SIM_FABRIC_INTERNAL_H

#include "tern/fabric.h"

tern_status tern_fabric_build(const tern_machine *m, const tern_instance_spec *in, unsigned cluster_count,
                              const tern_fabric_opts *o, tern_fabric **out, tern_error *err);
void tern_fabric_set_name(tern_fabric *f, const char *name);

/* *is_cluster = 1 when spec names a readable file (a path: contains '/' or ends in ".json") whose JSON has
 * "schema": "tern-cluster/1". A malformed JSON file is an error here (with its byte offset); a file that is
 * not a cluster file is left to the machine loader. */
tern_status tern_cluster_file_sniff(const char *spec, int *is_cluster, tern_error *err);
tern_status tern_cluster_file_load(const char *path, const tern_fabric_opts *o, tern_fabric **out,
                                   tern_error *err);

#endif
