/* wd_lazy_open, wd_lazy_need (common/lazy.h). */
#include "common/lazy.h"
#include "common/log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int wd_lazy_open(const char *soname, const char *const *names, void **slots,
		 size_t n)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		wd_warn("cannot load %s: %s", soname, dlerror());
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (!(slots[i] = dlsym(h, names[i]))) {
			wd_warn("%s has no symbol %s", soname, names[i]);
			return -1; /* the handle stays: nothing was called */
		}
	return 0; /* the handle stays open for the process's life */
}

int wd_lazy_need(const char *soname, const char *const *names, void **slots,
		 size_t n)
{
	if (wd_lazy_open(soname, names, slots, n) == 0)
		return 0;
	fprintf(stderr, "warden: cannot use %s (see above): stopping\n",
		soname);
	_exit(127);
}
