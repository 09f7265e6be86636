/* Internal to the manifest parser (manifest.c, manifest_fields.c). */
#ifndef WD_MANIFEST_INT_H
#define WD_MANIFEST_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/manifest.h"
#include "policy/ywalk.h"

/* Parse state for one document: the manifest plus what needs a look at
 * sibling keys once the whole mapping is read. */
struct mctx {
	struct wd_manifest *m;
	bool approval_required_above; /* seed form `approval: required_above` */
	yaml_node_t *approval_node;
	yaml_node_t *approval_threshold_node;
	yaml_node_t *exec_node;
	yaml_node_t *input_node;
	yaml_node_t *schema_node; /* args_schema */
	yaml_node_t *argv_node;	  /* argv template */
	yaml_node_t *listen_node; /* network.listen */
	yaml_node_t *allow_node;  /* network.allow */
	yaml_node_t *write_node;  /* filesystem.write */
	/* replay.environment, read into a scratch manifest (its net_allow,
	 * fs_write, env) and judged against the rest once all is read */
	yaml_node_t *replay_node, *replay_allow_node, *replay_write_node;
	struct wd_manifest *replay_scratch;
};

/* The top-level manifest keys and their handlers (obj: struct mctx *). */
extern const struct wd_y_key wd_manifest_keys[];
extern const size_t wd_manifest_n_keys;

/* Append the {arg: number} mapping v to a->above_*; 0, or -EINVAL with each
 * problem reported through wd_y_err (what names the field). */
int wd_manifest_thresholds(struct wd_ywalk *w, yaml_node_t *v, const char *what,
			   struct wd_approval *a);

/* The `argv` key's handler (manifest_schema.c). */
int wd_manifest_f_argv(struct wd_ywalk *w, yaml_node_t *v, void *obj);

/* Once the whole mapping is read: args_schema against the validator's
 * keyword table, and the argv template against the schema; each problem
 * at its node's file:line:col. */
void wd_manifest_check_schema(struct wd_ywalk *w, struct mctx *c);
void wd_manifest_check_argv(struct wd_ywalk *w, struct mctx *c);

/* replay.environment once the whole document is read (manifest_fields.c):
 * checks it against the manifest (internal only, disjoint from production)
 * and sets c->m->replay_env; frees the scratch. */
void wd_manifest_replay_finish(struct wd_ywalk *w, struct mctx *c);
/* Handlers shared with manifest_replay.c (obj: struct mctx *). */
int wd_manifest_net_allow(struct wd_ywalk *w, yaml_node_t *v, void *o);
int wd_manifest_fs_write(struct wd_ywalk *w, yaml_node_t *v, void *o);
int wd_manifest_f_replay(struct wd_ywalk *w, yaml_node_t *v, void *o);
/* A deep copy (manifest.c). */
struct wd_manifest *wd_manifest_clone(const struct wd_manifest *m);

#endif
