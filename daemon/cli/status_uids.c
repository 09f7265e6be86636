/* `warden status`: the per-call uids that are lost (sandbox/uidpool.h
 * wd_uid_lost_count): a dead call's write path was moved or removed, so
 * what it left there cannot be found and settled; warden never reuses
 * such a uid, and only the operator can give it back. Read from the
 * records' directory this process would use ($WARDEN_UID_DIR or
 * /var/lib/warden/uids), not from wardend. */
#include <errno.h>
#include <stdio.h>

#include "cli/status_int.h"
#include "common/util.h"
#include "sandbox/uidpool.h"

/* The operator's fix, one text for both outputs. */
static char *fix_text(const char *dir, uint32_t first)
{
	return wd_asprintf(
	    "for each such uid U (the first is %u): its record %s/U names "
	    "the write paths it had; find what U still owns (find / -xdev "
	    "-uid U -o -gid U), remove it or give it to its owner, then "
	    "remove the record (rm %s/U): warden then takes U again once "
	    "no process of it runs",
	    (unsigned)first, dir, dir);
}

json_t *wd_status_uids(void)
{
	char dir[400];
	wd_uid_dir_name(dir, sizeof(dir));
	uint32_t first = 0;
	int n = wd_uid_lost_count(dir, &first);
	json_t *o = json_pack("{s:s}", "dir", dir);
	if (n < 0 && n != -ENOENT) {
		json_object_set_new(
		    o, "error",
		    json_string(wd_status_etext(n, (char[96]){0}, 96)));
		return o;
	}
	json_object_set_new(o, "lost", json_integer(n < 0 ? 0 : n));
	if (n > 0) {
		char *fix = fix_text(dir, first);
		json_object_set_new(o, "first_lost", json_integer(first));
		json_object_set_new(o, "fix", json_string(fix));
		free(fix);
	}
	return o;
}

void wd_status_uids_text(void)
{
	char dir[400];
	wd_uid_dir_name(dir, sizeof(dir));
	uint32_t first = 0;
	int n = wd_uid_lost_count(dir, &first);
	printf("\nPer-call uids (records in %s)\n", dir);
	struct wd_buf b = {0};
	if (n < 0 && n != -ENOENT)
		wd_buf_printf(&b, "cannot read the records: %s", ET(n));
	else if (n <= 0)
		wd_buf_printf(&b, "lost: 0");
	else {
		char *fix = fix_text(dir, first);
		wd_buf_printf(&b,
			      "lost: %d (a dead call's write path was moved "
			      "or removed: what it left cannot be found, the "
			      "uid is never reused). Fix: %s",
			      n, fix);
		free(fix);
	}
	wd_status_wrap(b.data);
	wd_buf_free(&b);
}
