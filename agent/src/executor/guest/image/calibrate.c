/*
 * farm-sample --calibrate: how long this machine takes for a fixed piece of
 * plain CPU work, so that the host can say how much slower a guest ran
 * than the host itself (guest_slowdown). Under KVM a guest loses time to
 * steal, which its /proc/stat accounts; under TCG nothing is accounted
 * (steal reads 0) and the emulation itself is the slowdown: only timing
 * the same work on both sides shows it. sampler.rs appends this file to
 * sampler.c: the guest's image and the host run the one program, the
 * host's build natively (for an s390x guest, the same source built for
 * the host).
 *
 * It writes one line and exits:
 *
 *   calibrate <iterations> <ns> <ns> <ns> <ns> <ns>
 *
 * the loop's iterations (the same on both sides, or the figures are not
 * comparable) and each of CALIBRATION_REPS repetitions' time in ns. The
 * host takes the median of each side: the first repetition pays for
 * TCG's translation, and a busy host preempts some.
 *
 * The time is the thread's CPU time (the monotonic clock on a kernel
 * without POSIX timers), not the wall clock: on the host the
 * loop's cost without the other load there; in a TCG guest, which accounts
 * no steal, the vCPU's time emulating it, the host's preemption of that
 * vCPU included, which is how slowly the guest ran. The runner calls it
 * before the workload starts (the sampler's budget is over the workload's
 * run): 5 ms natively, about 12 ms under TCG on a quiet x86_64 host
 * (the loop runs 2.3 times slower there: TCG's plain code, where a
 * workload's system calls and interrupts cost it far more).
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* About 1 ms natively (2.5 ns an iteration on a 2020s x86_64 core). */
#define CALIBRATION_ITERATIONS 400000
#define CALIBRATION_REPS 5

/* The thread's CPU clock where the kernel has one; a kernel built without
 * CONFIG_POSIX_TIMERS (the farm's tinyconfig builds from trees) has only
 * the wall clocks, and the monotonic one is then the time: the loop runs
 * before the workload, so what else runs in the guest is next to nothing,
 * and the host's preemption of the vCPU is in either clock. */
static clockid_t calibration_clock(void)
{
	struct timespec t;
	return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0 ? CLOCK_THREAD_CPUTIME_ID
								: CLOCK_MONOTONIC;
}

static unsigned long long clock_ns(clockid_t clock)
{
	struct timespec t;
	if (clock_gettime(clock, &t))
		return 0;
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* Integer arithmetic and loads and stores in a 4 KiB table: a workload's
 * plain code, where TCG's cost is the translated instructions and its
 * software TLB on every access. The empty asm is a compiler barrier: x
 * and the table must be real at each iteration, so that the loop is
 * neither folded nor vectorised away, and costs what it says on every
 * arch and compiler. */
static uint32_t table[1024];

static uint64_t work(uint64_t x)
{
	for (long i = 0; i < CALIBRATION_ITERATIONS; i++) {
		uint32_t *slot = &table[(x >> 40) & 1023];
		x = x * 6364136223846793005ull + *slot;
		*slot += (uint32_t)x;
		__asm__ volatile("" : "+r"(x) : : "memory");
	}
	return x;
}

static int calibrate(void)
{
	unsigned long long ns[CALIBRATION_REPS];
	uint64_t x = 1;
	clockid_t clock = calibration_clock();
	for (int r = 0; r < CALIBRATION_REPS; r++) {
		unsigned long long t0 = clock_ns(clock);
		x = work(x);
		ns[r] = clock_ns(clock) - t0;
		/* No clock at all: no figure, rather than one the host refuses
		 * (a run is never lost to its calibration). */
		if (t0 == 0 || ns[r] == 0)
			return 0;
	}
	/* One write, after the timing: printing costs a trap per line under
	 * TCG, and the host reads the line whole. */
	char line[256];
	int n = snprintf(line, sizeof line, "calibrate %d", CALIBRATION_ITERATIONS);
	for (int r = 0; r < CALIBRATION_REPS && n > 0 && (size_t)n < sizeof line; r++)
		n += snprintf(line + n, sizeof line - (size_t)n, " %llu", ns[r]);
	if (n <= 0 || (size_t)n + 1 >= sizeof line)
		return 1;
	line[n++] = '\n';
	/* x, written nowhere, is still the loop's result: the barrier kept it. */
	(void)x;
	return fwrite(line, 1, (size_t)n, stdout) == (size_t)n && fflush(stdout) == 0 ? 0 : 1;
}
