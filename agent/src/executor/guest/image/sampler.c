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
 *                         counter is cumulative; the file the dearest),
 *                         only where the perf counters could not be opened
 *   counts <task_clock_ns> <context_switches> <cpu_migrations> <page_faults>
 *                         with --go, when it stops: the workload's perf
 *                         counters, every process and thread it started
 *                         included (as `perf stat` counts on hosts)
 *   rq /proc/P/task/T/schedstat:<run> <wait> <slices>
 *   cpu <line>            each cpu line of /proc/stat
 *   sampler <u> 0m0.000s 0m0.000s 0m0.000s
 *                         its own CPU time when it stops, in `times`' form
 *
 * Only the workload's session is read; a process of another session is
 * remembered and never read again (those of session 0, the kernel's
 * threads, are found before the workload starts and its cost counts). Each thread's stat and schedstat stay
 * open and are re-read with pread (one system call where open, read and
 * close are three; under TCG each counts); past the descriptor limit a
 * thread's files are opened and closed per sweep instead.
 *
 * Like the host's sampler it keeps to a budget of 0.4% of the workload's
 * CPU time, here over the whole run: a sweep comes when what the sampler
 * has spent, with that sweep at the last one's cost (the first one's
 * foretold from the prescan), is within 0.4% of the guest's busy CPU time
 * since the start; never closer than --interval-ms, and never further
 * than 2 s, as on hosts, for the first 20 s, 4 s after that (an emulated
 * s390x guest's sweep costs some three times an x86_64 one's), whatever
 * the budget says. A budget per sweep instead (each sweep's cost against
 * what the workload used since the one before) let the first sweeps, which
 * open every thread's files (under TCG 0.5 ms a thread), cost 0.9-1.3% of
 * runs of a second. Such a run now has one sweep or none; its totals do
 * not depend on sweeps (the counters, and the runqueues' wait, which the
 * host takes from /proc/schedstat). It starts before the workload, reads the session id from
 * --session-from (a FIFO the runner writes once the workload started), and
 * counts its cost from then. It stops when --stop's file appears
 * (SIGUSR1 cuts its sleep short), after one more sweep only if there has
 * been none. A file that vanishes meanwhile
 * (a thread that exited) is skipped.
 * With --go PATH (a FIFO), the session's leader is the runner's wrapper,
 * waiting on PATH: the sampler opens the perf counters on it and writes a
 * line there, and the wrapper execs the workload.
 * --root DIR reads DIR/proc instead of /proc (the host's tests).
 * --calibrate alone times fixed CPU work instead (calibrate.c, appended).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sys/syscall.h>
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

static int calibrate(void);
/* /proc/PID/stat's fields, read after the comm (statline.c). */
static long session_of(const char *stat);
static long num_threads(const char *stat);
static size_t through_processor(const char *stat, size_t n);

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

/* This process's CPU time, ns: one system call (its schedstat took three
 * and a file's formatting, at every sweep). */
static unsigned long long own_cpu(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t))
		return 0;
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
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
	/* Whether sweeps read migrations from `sched` (no perf counters). */
	int migrations;
	unsigned *pids, *tids;
	size_t pids_cap, tids_cap;
};

/* Before the cost counts (the workload has not started yet): every
 * process of session 0 is remembered as not the workload's, so that the
 * first sweep does not read them. In a guest they are most of its
 * processes: the kernel's threads (and an init that never called setsid).
 * Only session 0 can be judged this early: the workload's process may
 * already be forked but not yet in its own session. Returns what reading
 * a file cost (s), from which the first sweep's cost is foretold. */
static double prescan(struct sweeper *s)
{
	static char text[4096];
	char path[4096];
	unsigned long long t0 = own_cpu();
	snprintf(path, sizeof path, "%s/proc", root);
	size_t npids = numbered(path, &s->pids, &s->pids_cap);
	for (size_t i = 0; i < npids; i++) {
		snprintf(path, sizeof path, "%s/proc/%u/stat", root, s->pids[i]);
		if (slurp(path, text, sizeof text) > 0 && session_of(text) == 0)
			set_add(&s->others, s->pids[i]);
	}
	return npids ? (double)(own_cpu() - t0) / 1e9 / (double)npids : 0;
}

/* The guest's busy CPU time so far, in seconds: its online CPUs' time
 * since boot less their idle time (/proc/uptime's two fields: one small
 * file, where /proc/stat formats every interrupt); -1 if it does not read. */
static double busy_s(void)
{
	char path[4096], text[128];
	snprintf(path, sizeof path, "%s/proc/uptime", root);
	if (slurp(path, text, sizeof text) <= 0)
		return -1;
	char *end;
	double up = strtod(text, &end), idle = strtod(end, NULL);
	return (double)sysconf(_SC_NPROCESSORS_ONLN) * up - idle;
}

/* Threads in the system (/proc/loadavg's `running/total`, one small file:
 * listing /proc costs a first sweep's worth under TCG); -1 if unread. */
static long nr_threads(void)
{
	char path[4096], text[128];
	snprintf(path, sizeof path, "%s/proc/loadavg", root);
	if (slurp(path, text, sizeof text) <= 0)
		return -1;
	char *slash = strchr(text, '/');
	return slash ? strtol(slash + 1, NULL, 10) : -1;
}

/* One sweep's lines into out. */
static void sweep(struct sweeper *s, const char *up, long session, struct buf *out)
{
	static char text[1 << 16];
	char path[4096];
	int migrations_now = s->migrations && s->sweeps % MIGRATIONS_EVERY == 0;
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

/* The workload's perf counters, as `perf stat` opens them on a command it
 * starts: on the session leader while it waits (the runner's wrapper, on
 * --go), inherited by every process and thread it starts, enabled at its
 * exec. In the order of the `counts` line. */
static const unsigned long long COUNTED[] = {
	PERF_COUNT_SW_TASK_CLOCK,
	PERF_COUNT_SW_CONTEXT_SWITCHES,
	PERF_COUNT_SW_CPU_MIGRATIONS,
	PERF_COUNT_SW_PAGE_FAULTS,
};
#define NCOUNTED (sizeof COUNTED / sizeof COUNTED[0])

/* Opens the counters on pid; 0, or -1 with none open (a kernel without
 * perf events: the sweeps then read migrations from `sched`). */
static int open_counters(long pid, int fds[NCOUNTED])
{
	for (size_t i = 0; i < NCOUNTED; i++) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof a);
		a.size = sizeof a;
		a.type = PERF_TYPE_SOFTWARE;
		a.config = COUNTED[i];
		a.disabled = 1;
		a.inherit = 1;
		a.enable_on_exec = 1;
		fds[i] = (int)syscall(SYS_perf_event_open, &a, (pid_t)pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fds[i] < 0) {
			fprintf(stderr, "farm-sample: perf_event_open: %s\n", strerror(errno));
			while (i-- > 0)
				close(fds[i]);
			return -1;
		}
	}
	return 0;
}

/* Lets the waiting workload exec: one line into the --go FIFO. */
static void release(const char *go)
{
	char path[4096];
	snprintf(path, sizeof path, "%s%s", root, go);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "go\n", 3) != 3)
		fprintf(stderr, "farm-sample: %s: %s\n", go, strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void usage(const char *why)
{
	fprintf(stderr,
		"farm-sample: %s\nusage: farm-sample (--session ID | --session-from PATH) "
		"--interval-ms N --stop PATH [--go PATH] [--root DIR] | farm-sample --calibrate\n",
		why);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--calibrate"))
		return calibrate();
	const char *session_from = NULL, *stop = NULL, *go = NULL;
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
		} else if (!strcmp(a, "--go")) {
			go = v;
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
	if ((session_from && session_from[0] != '/') || stop[0] != '/' || (go && go[0] != '/'))
		usage("--session-from, --stop and --go take absolute paths");
	char path[4096], text[MAX_SESSION_TEXT + 1];
	struct sweeper s;
	memset(&s, 0, sizeof s);
	double per_file = prescan(&s);
	long threads0 = nr_threads();
	if (session_from) {
		snprintf(path, sizeof path, "%s%s", root, session_from);
		ssize_t n = slurp(path, text, sizeof text);
		char *end;
		session = n > 0 ? strtol(text, &end, 10) : -1;
		if (n <= 0 || (*end && *end != '\n') || session <= 0) {
			fprintf(stderr, "farm-sample: %s: not a session id\n", session_from);
			if (go)
				release(go);
			return 1;
		}
	}
	/* Before the workload runs: it waits on --go. */
	int counters[NCOUNTED];
	int counting = go && open_counters(session, counters) == 0;
	double busy0 = busy_s();
	if (go)
		release(go);
	/* With the counters, migrations are counted exactly, and no sweep
	 * reads `sched` (1.5 ms a thread under TCG: six times stat and
	 * schedstat together). */
	s.migrations = !counting;
	char stop_path[4096];
	snprintf(stop_path, sizeof stop_path, "%s%s", root, stop);
	/* The cost counts from here: starting came before the workload. */
	unsigned long long started = own_cpu();
	struct buf out = {NULL, 0, 0};
	double started_t = now_s(), lo = (double)interval_ms / 1000;
	double last_sweep_t = started_t, last_cost = -1, last_busy = busy0, last_t = started_t;
	unsigned long long last_cs = 0;
	int have_cs = 0;
	/* The first sweep one interval after the start at the earliest: the
	 * workload's threads are not there yet at its start. */
	sleep_s(lo);
	for (;;) {
		/* Stopped after the workload ended: its threads are gone, and
		 * a sweep would cost without finding any (unless none came yet). */
		int stopping = access(stop_path, F_OK) == 0;
		if (have_cs && stopping)
			break;
		/* The budget, over the whole run: a sweep comes when what the
		 * sampler has spent, with the sweep at the last one's cost, is
		 * within BUDGET of the guest's busy CPU time since the start (in
		 * a guest, the workload's, its exited threads included); until
		 * then it waits for the workload to earn it at its current rate.
		 * Not past the cap, whatever it costs (an idle workload earns
		 * little). */
		unsigned long long check0 = own_cpu();
		double t = now_s();
		double cap = (t - started_t > LONG_RUN_S ? LONG_RUN_MAX_STRETCH_MS : MAX_STRETCH_MS) / 1000.0;
		double busy = busy_s();
		if (!stopping && busy >= 0 && busy0 >= 0 && t - last_sweep_t < cap) {
			/* Before the first sweep: the threads born since the prescan
			 * (the workload's, and the runner's few), two files each. */
			double predicted = last_cost;
			if (predicted < 0) {
				long born = nr_threads() - threads0;
				predicted = per_file * 2 * (double)(threads0 >= 0 && born > 0 ? born : 1);
			}
			unsigned long long cpu = own_cpu();
			double spent = (double)(cpu > started ? cpu - started : 0) / 1e9;
			/* A look costs too (under TCG some tenths of a ms, and more
			 * where the host stalls the vCPU meanwhile): the wait pays
			 * for the next one, or looking eats the budget. The first
			 * sweep waits only for its own cost to be earned: the looks
			 * before it, charged to it, left a 1-s run of four threads
			 * without any. */
			double look = (double)(cpu > check0 ? cpu - check0 : 0) / 1e9;
			double owed = (last_cost >= 0 ? spent + look : 0) + predicted - BUDGET * (busy - busy0);
			if (owed > 0) {
				double rate = (busy - last_busy) / (t - last_t > 1e-9 ? t - last_t : 1e-9);
				last_busy = busy;
				last_t = t;
				double wait = owed / (BUDGET * (rate > 1e-3 ? rate : 1e-3));
				double left = cap - (t - last_sweep_t);
				sleep_s(wait < lo ? lo : wait > left ? left : wait);
				continue;
			}
		}
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
		unsigned long long before = own_cpu();
		sweep(&s, up, session, &out);
		if (write_all(out.p, out.len))
			return 1;
		unsigned long long after = own_cpu();
		last_cost = (double)(after > before ? after - before : 0) / 1e9;
		last_sweep_t = now_s();
		if (access(stop_path, F_OK) == 0)
			break;
		sleep_s(lo);
	}
	unsigned long long ms = (own_cpu() - started) / 1000000;
	out.len = 0;
	if (counting) {
		unsigned long long v[NCOUNTED];
		for (size_t i = 0; i < NCOUNTED; i++)
			if (read(counters[i], &v[i], sizeof v[i]) != (ssize_t)sizeof v[i])
				counting = 0;
		if (counting)
			printf_(&out, "counts %llu %llu %llu %llu\n", v[0], v[1], v[2], v[3]);
	}
	printf_(&out, "sampler %llum%llu.%03llus 0m0.000s 0m0.000s 0m0.000s\n", ms / 60000,
		ms / 1000 % 60, ms % 1000);
	return write_all(out.p, out.len) ? 1 : 0;
}
