/*
 * farm-sample: the guest runner's sampler, one static process that reads
 * /proc without forking, for guests of every arch (the host builds it with
 * its gcc, or Debian's s390x cross gcc, and caches it; see sampler.rs).
 *
 * The runner's shell loop forked a sed and a grep or two per sweep; under
 * TCG each fork costs tens of milliseconds and the sweeps cost a tenth of
 * the CPUs they measured. This program writes the same lines on stdout
 * (the runner points it at the report channel), one write per sweep:
 *
 *   sample <uptime>       /proc/uptime's first field, at each sweep's start
 *   task <line>           /proc/P/task/T/stat of each thread of the session,
 *                         cut after field 39 (processor), the last the host
 *                         reads: the rest is a quarter of the bytes
 *   mig /proc/P/task/T/sched:se.nr_migrations : N
 *                         that thread's sched, every tenth sweep (the
 *                         counter is cumulative; the file the dearest)
 *   rq /proc/P/task/T/schedstat:<run> <wait> <slices>
 *   cpu <line>            each cpu line of /proc/stat
 *   sampler <u> 0m0.000s 0m0.000s 0m0.000s
 *                         its own CPU time when it stops, in `times`' form
 *
 * Only the workload's session is read; a process of another session is
 * remembered and never read again. Each thread's stat and schedstat stay
 * open and are re-read with pread (one system call where open, read and
 * close are three; under TCG each counts); past the descriptor limit a
 * thread's files are opened and closed per sweep instead. Like the host's
 * sampler it keeps to a budget of 0.4% of the workload's CPU time by
 * spacing its sweeps (never closer than --interval-ms, never further than
 * 2 s, as on hosts, for the first 20 s; 4 s after that: an emulated s390x
 * guest's sweep costs some three times an x86_64 one's, and at 2 s a 31-s
 * s390x run cost 0.54%, while a 4-s cap from the start left a 3-s run two
 * sweeps and lost most of its runqueue wait). It starts before the workload, reads the session id from
 * --session-from (a FIFO the runner writes once the workload started), and
 * counts its cost from then. It stops at the sweep after --stop's file
 * appears (SIGUSR1 cuts its sleep short). A file that vanishes meanwhile (a thread that exited) is skipped.
 * --root DIR reads DIR/proc instead of /proc (the host's tests).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUDGET 0.004
#define MAX_STRETCH_MS 2000
#define LONG_RUN_S 20
#define LONG_RUN_MAX_STRETCH_MS 4000
#define MIN_INTERVAL_MS 10
#define MAX_INTERVAL_MS 10000
#define MIGRATIONS_EVERY 10
#define MAX_SESSION_TEXT 32

static const char *root = "";

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 16;
		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			fputs("farm-sample: out of memory\n", stderr);
			exit(1);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(struct buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A whole small file (at most cap - 1 bytes) into dst; its length, or -1. */
static ssize_t slurp(const char *path, char *dst, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, dst + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap - 1)
			break;
	}
	close(fd);
	dst[n] = 0;
	return (ssize_t)n;
}

/* A set of pids or tids: open addressing, grown at half full. */
struct set {
	unsigned *k;
	size_t cap, len;
};

static int set_has(const struct set *s, unsigned k)
{
	if (!s->cap)
		return 0;
	for (size_t i = (k * 2654435761u) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->k[i] == 0)
			return 0;
		if (s->k[i] == k)
			return 1;
	}
}

static void set_add(struct set *s, unsigned k)
{
	if (set_has(s, k))
		return;
	if ((s->len + 1) * 2 > s->cap) {
		struct set g = {calloc(s->cap ? s->cap * 2 : 256, sizeof(unsigned)),
				s->cap ? s->cap * 2 : 256, 0};
		if (!g.k) {
			fputs("farm-sample: out of memory\n", stderr);
			exit(1);
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->k[i])
				set_add(&g, s->k[i]);
		free(s->k);
		*s = g;
	}
	size_t i = (k * 2654435761u) & (s->cap - 1);
	while (s->k[i])
		i = (i + 1) & (s->cap - 1);
	s->k[i] = k;
	s->len++;
}

/* A thread's kept descriptors (-1: not open), by tid, in a flat list that
 * is rebuilt each sweep with the threads still there. */
struct handle {
	unsigned tid;
	int stat, schedstat;
};

struct handles {
	struct handle *h;
	size_t len, cap;
};

static struct handle *handle_of(struct handles *hs, unsigned tid)
{
	/* Threads come in the same order every sweep: look from the last hit. */
	static size_t last;
	for (size_t n = 0; n < hs->len; n++) {
		size_t i = (last + n) % hs->len;
		if (hs->h[i].tid == tid) {
			last = i + 1;
			return &hs->h[i];
		}
	}
	if (hs->len == hs->cap) {
		hs->cap = hs->cap ? hs->cap * 2 : 64;
		hs->h = realloc(hs->h, hs->cap * sizeof *hs->h);
		if (!hs->h) {
			fputs("farm-sample: out of memory\n", stderr);
			exit(1);
		}
	}
	hs->h[hs->len] = (struct handle){tid, -1, -1};
	return &hs->h[hs->len++];
}

/* The text of a thread's file through its kept descriptor (opened now if
 * need be; when no descriptor can be kept, read and closed). */
static ssize_t read_kept(int *fd, const char *path, char *dst, size_t cap)
{
	if (*fd < 0) {
		*fd = open(path, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return errno == EMFILE || errno == ENFILE ? slurp(path, dst, cap) : -1;
	}
	ssize_t n = pread(*fd, dst, cap - 1, 0);
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return -1;
	}
	dst[n] = 0;
	return n;
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

/* The numeric entries of a directory, sorted; their count (list reused). */
static size_t numbered(const char *dir, unsigned **list, size_t *cap)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		unsigned long v = strtoul(e->d_name, &end, 10);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || v == 0 || v > 0xffffffffu)
			continue;
		if (n == *cap) {
			*cap = *cap ? *cap * 2 : 256;
			*list = realloc(*list, *cap * sizeof **list);
			if (!*list) {
				fputs("farm-sample: out of memory\n", stderr);
				exit(1);
			}
		}
		(*list)[n++] = (unsigned)v;
	}
	closedir(d);
	qsort(*list, n, sizeof **list, cmp_unsigned);
	return n;
}

/* Field 6 of a stat line (the session), counted after the comm's ')'. */
static long session_of(const char *stat)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return -1;
	p++;
	for (int field = 0; field < 4; field++) {
		while (*p == ' ')
			p++;
		if (field == 3)
			break;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	long v = strtol(p, &end, 10);
	return end == p ? -1 : v;
}

/* Field 20 of a stat line (num_threads); 0 if it does not read. */
static long num_threads(const char *stat)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return 0;
	p++;
	/* After the comm, field n is the (n - 2)th word: field 20 the 18th. */
	for (int word = 0; word < 17; word++) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')
			p++;
	}
	char *end;
	long v = strtol(p, &end, 10);
	return end == p ? 0 : v;
}

/* The length of a stat line through field 39 (the 37th word after the
 * comm), without its trailing whitespace. */
static size_t through_processor(const char *stat, size_t n)
{
	while (n && (stat[n - 1] == '\n' || stat[n - 1] == ' '))
		n--;
	const char *close = NULL;
	for (size_t i = n; i-- > 0;)
		if (stat[i] == ')') {
			close = stat + i;
			break;
		}
	if (!close)
		return n;
	int words = 0, in_word = 0;
	for (size_t i = (size_t)(close - stat) + 1; i < n; i++) {
		int space = stat[i] == ' ';
		if (!space && !in_word)
			words++;
		if (space && in_word && words == 37)
			return i;
		in_word = !space;
	}
	return n;
}

/* This process's CPU time (it has one thread), ns on a CPU. */
static unsigned long long own_cpu(void)
{
	char path[4096], text[128];
	snprintf(path, sizeof path, "%s/proc/self/schedstat", root);
	if (slurp(path, text, sizeof text) <= 0)
		return 0;
	return strtoull(text, NULL, 10);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Set by SIGUSR1, which the runner sends with the stop file: a sampler
 * that stretched its interval to 4 s does not keep the guest up that long. */
static volatile sig_atomic_t woken;

static void on_wake(int sig) { (void)sig; woken = 1; }

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (!woken && nanosleep(&t, &t) && errno == EINTR)
		;
}

/* /proc/uptime's first field as written, and in centiseconds; 0 if bad. */
static int uptime(char *first, size_t cap, unsigned long long *cs)
{
	char path[4096], text[128];
	snprintf(path, sizeof path, "%s/proc/uptime", root);
	if (slurp(path, text, sizeof text) <= 0)
		return 0;
	size_t n = strcspn(text, " \n");
	if (n == 0 || n >= cap)
		return 0;
	memcpy(first, text, n);
	first[n] = 0;
	char *dot = strchr(first, '.');
	if (!dot || dot == first || strlen(dot + 1) < 2)
		return 0;
	for (char *c = first; c < dot + 3; c++)
		if (c != dot && (*c < '0' || *c > '9'))
			return 0;
	*cs = strtoull(first, NULL, 10) * 100 + (unsigned long long)((dot[1] - '0') * 10 + (dot[2] - '0'));
	return 1;
}

struct sweeper {
	struct set others, ours;
	struct handles kept;
	unsigned long long sweeps;
	unsigned *pids, *tids;
	size_t pids_cap, tids_cap;
};

/* One sweep's lines into out; the session's CPU time so far (ns). */
static unsigned long long sweep(struct sweeper *s, const char *up, long session, struct buf *out)
{
	static char text[1 << 16];
	char path[4096];
	unsigned long long run_ns = 0;
	int migrations_now = s->sweeps % MIGRATIONS_EVERY == 0;
	s->sweeps++;
	printf_(out, "sample %s\n", up);
	snprintf(path, sizeof path, "%s/proc", root);
	size_t npids = numbered(path, &s->pids, &s->pids_cap);
	struct handles next = {NULL, 0, 0};
	for (size_t i = 0; i < npids; i++) {
		unsigned pid = s->pids[i];
		if (set_has(&s->others, pid))
			continue;
		if (!set_has(&s->ours, pid)) {
			snprintf(path, sizeof path, "%s/proc/%u/stat", root, pid);
			if (slurp(path, text, sizeof text) < 0)
				continue;
			if (session_of(text) != session) {
				set_add(&s->others, pid);
				continue;
			}
			set_add(&s->ours, pid);
		}
		/* A process of one thread (each of a forking workload's) is read
		 * through its own thread's stat, whose num_threads says so: its
		 * task directory is listed only when it has more (three system
		 * calls fewer a process, each a trap under TCG). */
		struct handle *own = handle_of(&s->kept, pid);
		snprintf(path, sizeof path, "%s/proc/%u/task/%u/stat", root, pid, pid);
		ssize_t own_n = read_kept(&own->stat, path, text, sizeof text);
		size_t ntids;
		if (own_n > 0 && num_threads(text) == 1) {
			if (!s->tids_cap) {
				s->tids_cap = 256;
				s->tids = malloc(s->tids_cap * sizeof *s->tids);
				if (!s->tids) {
					fputs("farm-sample: out of memory\n", stderr);
					exit(1);
				}
			}
			s->tids[0] = pid;
			ntids = 1;
		} else {
			snprintf(path, sizeof path, "%s/proc/%u/task", root, pid);
			ntids = numbered(path, &s->tids, &s->tids_cap);
		}
		for (size_t j = 0; j < ntids; j++) {
			unsigned tid = s->tids[j];
			struct handle *h = handle_of(&s->kept, tid);
			/* The main thread, listed first, was read just above: `text`
			 * still holds it (listing the directory does not touch it). */
			ssize_t n = own_n;
			if (j > 0 || tid != pid || own_n < 0) {
				snprintf(path, sizeof path, "%s/proc/%u/task/%u/stat", root, pid, tid);
				n = read_kept(&h->stat, path, text, sizeof text);
			}
			if (n < 0)
				continue;
			puts_(out, "task ");
			put(out, text, through_processor(text, (size_t)n));
			puts_(out, "\n");
			if (migrations_now) {
				snprintf(path, sizeof path, "%s/proc/%u/task/%u/sched", root, pid, tid);
				if (slurp(path, text, sizeof text) > 0) {
					char *l = strstr(text, "\nse.nr_migrations");
					char *colon = l ? strchr(l, ':') : NULL;
					if (colon) {
						colon++;
						while (*colon == ' ')
							colon++;
						size_t len = strcspn(colon, " \n");
						printf_(out, "mig /proc/%u/task/%u/sched:se.nr_migrations : %.*s\n",
							pid, tid, (int)len, colon);
					}
				}
			}
			snprintf(path, sizeof path, "%s/proc/%u/task/%u/schedstat", root, pid, tid);
			n = read_kept(&h->schedstat, path, text, sizeof text);
			if (n > 0) {
				run_ns += strtoull(text, NULL, 10);
				while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
					n--;
				printf_(out, "rq /proc/%u/task/%u/schedstat:%.*s\n", pid, tid, (int)n, text);
			}
			/* Kept for the next sweep: a thread still there. */
			if (next.len == next.cap) {
				next.cap = next.cap ? next.cap * 2 : 64;
				next.h = realloc(next.h, next.cap * sizeof *next.h);
				if (!next.h) {
					fputs("farm-sample: out of memory\n", stderr);
					exit(1);
				}
			}
			next.h[next.len++] = *h;
			h->stat = h->schedstat = -1;
		}
	}
	/* Descriptors of threads that are gone would pin their /proc entries. */
	for (size_t i = 0; i < s->kept.len; i++) {
		if (s->kept.h[i].stat >= 0)
			close(s->kept.h[i].stat);
		if (s->kept.h[i].schedstat >= 0)
			close(s->kept.h[i].schedstat);
	}
	free(s->kept.h);
	s->kept = next;
	snprintf(path, sizeof path, "%s/proc/stat", root);
	if (slurp(path, text, sizeof text) > 0) {
		for (char *l = text; *l; ) {
			char *nl = strchr(l, '\n');
			size_t len = nl ? (size_t)(nl - l) : strlen(l);
			if (strncmp(l, "cpu", 3) == 0) {
				puts_(out, "cpu ");
				put(out, l, len);
				puts_(out, "\n");
			}
			if (!nl)
				break;
			l = nl + 1;
		}
	}
	return run_ns;
}

static int write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(1, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void usage(const char *why)
{
	fprintf(stderr,
		"farm-sample: %s\nusage: farm-sample (--session ID | --session-from PATH) "
		"--interval-ms N --stop PATH [--root DIR]\n",
		why);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *session_from = NULL, *stop = NULL;
	long session = -1, interval_ms = -1;
	/* The runner starts it with SIGUSR1 ignored, so that a wake-up sent
	 * before this point is lost rather than fatal (the stop file is what
	 * stops it). */
	struct sigaction wake;
	memset(&wake, 0, sizeof wake);
	wake.sa_handler = on_wake;
	sigaction(SIGUSR1, &wake, NULL);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage("an option without its value");
		char *end;
		if (!strcmp(a, "--session")) {
			session = strtol(v, &end, 10);
			if (*end || session <= 0)
				usage("--session: not a session id");
		} else if (!strcmp(a, "--session-from")) {
			session_from = v;
		} else if (!strcmp(a, "--interval-ms")) {
			interval_ms = strtol(v, &end, 10);
			if (*end || interval_ms < MIN_INTERVAL_MS || interval_ms > MAX_INTERVAL_MS)
				usage("--interval-ms: not a number from 10 to 10000");
		} else if (!strcmp(a, "--stop")) {
			stop = v;
		} else if (!strcmp(a, "--root")) {
			root = v;
		} else {
			usage("unknown option");
		}
		i++;
	}
	if ((session < 0) == !session_from || interval_ms < 0 || !stop)
		usage("missing option");
	if ((session_from && session_from[0] != '/') || stop[0] != '/')
		usage("--session-from and --stop take absolute paths");
	char path[4096], text[MAX_SESSION_TEXT + 1];
	if (session_from) {
		snprintf(path, sizeof path, "%s%s", root, session_from);
		ssize_t n = slurp(path, text, sizeof text);
		char *end;
		session = n > 0 ? strtol(text, &end, 10) : -1;
		if (n <= 0 || (*end && *end != '\n') || session <= 0) {
			fprintf(stderr, "farm-sample: %s: not a session id\n", session_from);
			return 1;
		}
	}
	char stop_path[4096];
	snprintf(stop_path, sizeof stop_path, "%s%s", root, stop);
	/* The cost counts from here: starting came before the workload. */
	unsigned long long started = own_cpu();
	struct sweeper s;
	memset(&s, 0, sizeof s);
	struct buf out = {NULL, 0, 0};
	double interval = (double)interval_ms / 1000, next = now_s(), started_t = next;
	unsigned long long last_cs = 0, last_run = 0, last_cpu = 0;
	int have_cs = 0, have_last = 0;
	double last_t = 0;
	for (;;) {
		/* Every sweep is stamped with a later uptime than the one before
		 * (the host refuses one that does not advance); /proc/uptime counts
		 * in 10 ms, and a starved sampler sweeps again at once. */
		char up[64];
		unsigned long long cs;
		if (!uptime(up, sizeof up, &cs)) {
			fputs("farm-sample: /proc/uptime does not read\n", stderr);
			return 1;
		}
		if (have_cs && cs <= last_cs) {
			sleep_s((double)MIN_INTERVAL_MS / 1000);
			continue;
		}
		have_cs = 1;
		last_cs = cs;
		out.len = 0;
		unsigned long long run_ns = sweep(&s, up, session, &out);
		if (write_all(out.p, out.len))
			return 1;
		if (access(stop_path, F_OK) == 0)
			break;
		/* The budget: this sweep's cost against what the workload used
		 * since the last one sets how long until the next. */
		unsigned long long cpu = own_cpu();
		double t = now_s();
		/* Not after the first sweep, which opens every thread's files
		 * (the dearest) and would stretch a short run's interval past
		 * its end: a run of under a second would then have one sweep,
		 * and no waits to show. */
		if (have_last) {
			double cost = (double)(cpu > last_cpu ? cpu - last_cpu : 0) / 1e9;
			double rate = (double)(run_ns > last_run ? run_ns - last_run : 0) / 1e9 /
				      (t - last_t > 1e-9 ? t - last_t : 1e-9);
			double wanted = cost / (BUDGET * (rate > 1e-3 ? rate : 1e-3));
			double lo = (double)interval_ms / 1000;
			double cap = (t - started_t > LONG_RUN_S ? LONG_RUN_MAX_STRETCH_MS : MAX_STRETCH_MS) / 1000.0;
			double hi = cap > lo ? cap : lo;
			interval = wanted < lo ? lo : wanted > hi ? hi : wanted;
		}
		have_last = 1;
		last_run = run_ns;
		last_cpu = cpu;
		last_t = t;
		/* After a stall, from now on rather than a burst of catching up. */
		next += interval;
		if (next < now_s())
			next = now_s();
		sleep_s(next - now_s());
	}
	unsigned long long ms = (own_cpu() - started) / 1000000;
	out.len = 0;
	printf_(&out, "sampler %llum%llu.%03llus 0m0.000s 0m0.000s 0m0.000s\n", ms / 60000,
		ms / 1000 % 60, ms % 1000);
	return write_all(out.p, out.len) ? 1 : 0;
}
