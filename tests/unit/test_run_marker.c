/* A run's marker (runtime/recover.c) says how the run ended when its
 * run_end waits for the trace store: it must fit its fixed 1 KiB however
 * long the reason or the store's error (a provider's error body can be
 * longer), shortened at a character boundary, never left unwritten. */
#include "runtime/rt_int.h"
#include "t.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *read_marker(const char *path)
{
	char buf[2048];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = 0;
	return json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
}

int main(void)
{
	char dir[] = "/tmp/wd-marker.XXXXXX";
	T_OK(mkdtemp(dir) != NULL, "marker-dir", "mkdtemp");
	struct wd_rt rt;
	memset(&rt, 0, sizeof(rt));
	rt.runs_dir = dir;
	json_t *mk = json_pack("{s:s}", "agent", "analyst");
	T_OK(rt_marker_write(&rt, "run_1", mk, true) == 0, "marker-create",
	     "created");
	json_decref(mk);

	/* a 3,000-byte reason of two-byte characters, a 1,500-byte error */
	char reason[3001], error[1501];
	for (int i = 0; i < 3000; i += 2)
		memcpy(reason + i, "\xc3\xa9", 2); /* é */
	reason[3000] = 0;
	memset(error, 'x', 1500);
	error[1500] = 0;
	mk = json_pack("{s:s,s:{s:s,s:s,s:s}}", "agent", "analyst", "end",
		       "status", "failed", "reason", reason, "error", error);
	int rc = rt_marker_write(&rt, "run_1", mk, false);
	T_OK(rc == 0, "marker-long-reason-written", "rc %d", rc);
	json_decref(mk);

	char path[256];
	snprintf(path, sizeof(path), "%s/run_1.active", dir);
	json_t *back = read_marker(path);
	T_OK(back != NULL, "marker-readable", "the marker parses as JSON");
	json_t *end = json_object_get(back, "end");
	T_OK(!strcmp(json_string_value(json_object_get(end, "status")) ?: "",
		     "failed"),
	     "marker-status-kept", "status %s",
	     json_string_value(json_object_get(end, "status")));
	const char *r = json_string_value(json_object_get(end, "reason"));
	size_t rl = r ? strlen(r) : 0;
	T_OK(r && rl > 64 && rl < 1024 && !strncmp(r, reason, rl - 3) &&
		 !strcmp(r + rl - 3, "..."),
	     "marker-reason-shortened", "reason of %zu bytes", rl);
	struct stat st;
	T_OK(stat(path, &st) == 0 && st.st_size == 1024, "marker-size-fixed",
	     "size %lld", (long long)st.st_size);
	json_decref(back);
	unlink(path);
	rmdir(dir);
	return T_DONE();
}
