#include "events/ringbuf.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"

struct wd_ringbuf {
	wd_ringbuf_cb cb;
	void *ctx;
	unsigned long *consumer_pos; /* the consumer page (ours to write) */
	unsigned long *producer_pos; /* the producer page, then the data */
	uint8_t *data;		     /* mapped twice: a record never wraps */
	uint64_t mask;
	uint64_t publish_every; /* bytes read between stores of the position */
	size_t page, data_len;
	int epoll_fd;
};

struct wd_ringbuf *wd_ringbuf_new(int map_fd, wd_ringbuf_cb cb, void *ctx)
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	if (bpf_obj_get_info_by_fd(map_fd, &info, &len))
		return NULL;
	/* the kernel makes max_entries a power of two of whole pages */
	if (info.type != BPF_MAP_TYPE_RINGBUF || !info.max_entries ||
	    (info.max_entries & (info.max_entries - 1))) {
		errno = EINVAL;
		return NULL;
	}
	struct wd_ringbuf *r = wd_calloc(1, sizeof(*r));
	r->cb = cb;
	r->ctx = ctx;
	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->mask = info.max_entries - 1;
	r->publish_every = WD_MIN((uint64_t)WD_RINGBUF_PUBLISH_MAX,
				  (uint64_t)info.max_entries / 8);
	r->epoll_fd = -1;
	r->data_len = r->page + 2 * (size_t)info.max_entries;
	int err;
	void *c =
	    mmap(NULL, r->page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (c == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	r->consumer_pos = c;
	/* the producer page and the data, twice in a row (the kernel maps
	 * the data pages twice from this offset on) */
	void *p = mmap(NULL, r->data_len, PROT_READ, MAP_SHARED, map_fd,
		       (off_t)r->page);
	if (p == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	r->producer_pos = p;
	r->data = (uint8_t *)p + r->page;
	struct epoll_event ev = {.events = EPOLLIN};
	r->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epoll_fd < 0 ||
	    epoll_ctl(r->epoll_fd, EPOLL_CTL_ADD, map_fd, &ev)) {
		err = errno;
		goto fail;
	}
	return r;
fail:
	wd_ringbuf_free(r);
	errno = err;
	return NULL;
}

void wd_ringbuf_free(struct wd_ringbuf *r)
{
	if (!r)
		return;
	if (r->consumer_pos)
		munmap(r->consumer_pos, r->page);
	if (r->producer_pos)
		munmap(r->producer_pos, r->data_len);
	if (r->epoll_fd >= 0)
		close(r->epoll_fd);
	free(r);
}

int wd_ringbuf_epoll_fd(const struct wd_ringbuf *r)
{
	return r->epoll_fd;
}

static void publish(struct wd_ringbuf *r, unsigned long pos)
{
	__atomic_store_n(r->consumer_pos, pos, __ATOMIC_RELEASE);
	/* a store then a load of another location: without a full fence
	 * the load may pass the store (x86 too), and a record committed in
	 * between would be neither read here nor woken for */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int64_t wd_ringbuf_consume(struct wd_ringbuf *r)
{
	/* struct bpf_ringbuf_hdr (kernel/bpf/ringbuf.c): u32 len with the
	 * busy and discard bits, u32 page offset; 8-byte aligned records */
	const uint32_t busy = BPF_RINGBUF_BUSY_BIT,
		       discard = BPF_RINGBUF_DISCARD_BIT;
	unsigned long cons = __atomic_load_n(r->consumer_pos, __ATOMIC_ACQUIRE);
	unsigned long published = cons;
	int64_t n = 0;
	for (;;) {
		unsigned long prod =
		    __atomic_load_n(r->producer_pos, __ATOMIC_ACQUIRE);
		bool stopped = false;
		int64_t rc = 0;
		while (cons < prod) {
			uint32_t *hdr =
			    (uint32_t *)(r->data + (cons & r->mask));
			uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
			if (len & busy) {
				stopped = true; /* its commit wakes us */
				break;
			}
			uint32_t sz = len & ~(busy | discard);
			cons += (sz + BPF_RINGBUF_HDR_SZ + 7) & ~7u;
			if (!(len & discard)) {
				n++;
				rc = r->cb(r->ctx, hdr + 2, sz);
				if (rc < 0)
					break;
			}
			if (cons - published >= r->publish_every) {
				publish(r, cons);
				published = cons;
			}
		}
		if (cons != published) {
			publish(r, cons);
			published = cons;
		}
		if (rc < 0)
			return rc;
		if (stopped)
			return n;
		/* anything committed while we read? */
		if (__atomic_load_n(r->producer_pos, __ATOMIC_ACQUIRE) == cons)
			return n;
	}
}
