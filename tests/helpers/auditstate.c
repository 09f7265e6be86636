/* auditstate: read or set the kernel audit "enabled" flag over netlink, so
 * a test that turns audit on (Landlock denial records) can put the node
 * back as it found it.   auditstate get | auditstate set 0|1 | auditstate lost
 * Prints the state for get; for lost, the kernel's count of records it
 * dropped (audit_lost: backlog limit, rate limit, no memory). Exit 0 ok,
 * 1 error, 2 usage. Needs root. */
#include <linux/audit.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int xfer(int fd, int type, const void *data, size_t len,
		struct audit_status *out)
{
	struct {
		struct nlmsghdr h;
		struct audit_status s;
	} req;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(len);
	req.h.nlmsg_type = type;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.h.nlmsg_seq = 1;
	if (len)
		memcpy(&req.s, data, len);
	struct sockaddr_nl k = {.nl_family = AF_NETLINK};
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (void *)&k, sizeof(k)) < 0)
		return -1;
	char buf[8192];
	for (int i = 0; i < 4; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return -1;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (int)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == AUDIT_GET && out) {
				memcpy(out, NLMSG_DATA(h), sizeof(*out));
				return 0;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error)
					return -1;
				if (!out)
					return 0;
			}
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	struct timeval tv = {2, 0};
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return 1;
	if (!strcmp(argv[1], "get") || !strcmp(argv[1], "lost")) {
		struct audit_status s;
		if (xfer(fd, AUDIT_GET, NULL, 0, &s) < 0)
			return 1;
		printf("%u\n", argv[1][0] == 'g' ? s.enabled : s.lost);
		return 0;
	}
	if (!strcmp(argv[1], "set") && argc > 2) {
		struct audit_status s;
		memset(&s, 0, sizeof(s));
		s.mask = AUDIT_STATUS_ENABLED;
		s.enabled = (unsigned)atoi(argv[2]);
		return xfer(fd, AUDIT_SET, &s, sizeof(s), NULL) < 0 ? 1 : 0;
	}
	return 2;
}
