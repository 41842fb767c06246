/*
 * fakenvml.c: a scripted libnvidia-ml.so.1 for tests on machines without
 * an NVIDIA GPU. It exports the NVML entry points coldtrace calls, with
 * the ABI of the nvml.h vendored by go-nvml, and answers them from a
 * scenario file named by FAKE_NVML_SCENARIO (format: scenarios/README.md).
 *
 * Build: make fake-nvml (gcc -shared -fPIC, nvml.h from go-nvml's module).
 * Use:   LD_LIBRARY_PATH=bin/fake-nvml FAKE_NVML_SCENARIO=... coldtrace ...
 *
 * The library holds no threads; coldtrace's sampler calls it from one
 * goroutine at a time (its lock), so the state below needs no lock.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_DEV 8
#define MAX_STEPS 64
#define MAX_EVENTS 256
#define MAX_PIDS 64
#define MAX_LINE 512
#define MAX_LINES 4096
#define COMM_LEN 16
#define PHASE_LEN 64

/* Queries a device can refuse (unsupported=, deny=). */
enum {
	Q_UTIL = 1 << 0,
	Q_MEM = 1 << 1,
	Q_CLOCK = 1 << 2,
	Q_POWER = 1 << 3,
	Q_PROCS = 1 << 4,
	Q_PUTIL = 1 << 5,
};

struct nvmlDevice_st {
	int index;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	unsigned long long total, base;
	unsigned int clock_mhz, power_mw;
	int mig;
	unsigned unsupported, denied;
};

/* One change at a step: a process setting (comm on dev) or a loss. */
struct event {
	int step, dev, lost;
	char comm[COMM_LEN];
	unsigned long long mem;
	unsigned int sm, memutil;
};

struct step {
	long at_ms; /* -1: triggered by a phase */
	char phase[PHASE_LEN];
	int fired;
};

struct proc {
	unsigned int pid, sm, memutil;
	unsigned long long mem;
};

static struct {
	int loaded, inited;
	nvmlReturn_t init_ret;
	int ndev;
	struct nvmlDevice_st dev[MAX_DEV];
	int nsteps;
	struct step steps[MAX_STEPS];
	int nevents;
	struct event events[MAX_EVENTS];
	struct timespec t0;
	char phase_file[512];
	char last_phase[PHASE_LEN];
	unsigned long acks;
} S;

static void complain(int line, const char *what)
{
	fprintf(stderr, "fake-nvml: %s line %d: %s\n", getenv("FAKE_NVML_SCENARIO"), line, what);
}

/* copy_bounded copies src into dst (size n), failing when it does not fit. */
static int copy_bounded(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		return -1;
	memcpy(dst, src, l + 1);
	return 0;
}

static int parse_u64(const char *s, unsigned long long *out)
{
	char *end;
	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return (errno || *end) ? -1 : 0;
}

/* parse_uint reads a decimal number of at most max. */
static int parse_uint(const char *s, unsigned long long max, unsigned int *out)
{
	unsigned long long v;
	if (parse_u64(s, &v) || v > max)
		return -1;
	*out = (unsigned int)v;
	return 0;
}

static int parse_pct(const char *s, unsigned int *out)
{
	return parse_uint(s, 100, out);
}

/* parse_queries reads a comma-separated list of query names into bits. */
static int parse_queries(const char *s, unsigned *out)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{"util", Q_UTIL}, {"mem", Q_MEM}, {"clock", Q_CLOCK},
		{"power", Q_POWER}, {"procs", Q_PROCS}, {"putil", Q_PUTIL},
	};
	char buf[128];
	if (copy_bounded(buf, sizeof buf, s))
		return -1;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < sizeof names / sizeof names[0]; i++)
			if (!strcmp(tok, names[i].name))
				break;
		if (i == sizeof names / sizeof names[0])
			return -1;
		*out |= names[i].bit;
	}
	return 0;
}

static int parse_init(const char *v)
{
	static const struct { const char *name; nvmlReturn_t ret; } inits[] = {
		{"ok", NVML_SUCCESS},
		{"driver_not_loaded", NVML_ERROR_DRIVER_NOT_LOADED},
		{"version_mismatch", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
		{"no_permission", NVML_ERROR_NO_PERMISSION},
	};
	for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++)
		if (!strcmp(v, inits[i].name)) {
			S.init_ret = inits[i].ret;
			return 0;
		}
	return -1;
}

/* parse_device: device INDEX key=value... name=REST OF LINE */
static int parse_device(char *rest, int line)
{
	char *name = strstr(rest, "name=");
	if (!name) {
		complain(line, "device needs name=");
		return -1;
	}
	*name = 0;
	name += 5;
	if (S.ndev >= MAX_DEV) {
		complain(line, "too many devices");
		return -1;
	}
	struct nvmlDevice_st *d = &S.dev[S.ndev];
	memset(d, 0, sizeof *d);
	d->clock_mhz = 1755;
	d->power_mw = 250000;
	if (copy_bounded(d->name, sizeof d->name, name)) {
		complain(line, "name too long");
		return -1;
	}
	char *save = NULL, *tok = strtok_r(rest, " \t", &save);
	unsigned long long idx;
	if (!tok || parse_u64(tok, &idx) || idx != (unsigned long long)S.ndev) {
		complain(line, "devices are numbered 0, 1, ... in order");
		return -1;
	}
	d->index = S.ndev;
	snprintf(d->uuid, sizeof d->uuid, "GPU-fake-%d", d->index);
	for (tok = strtok_r(NULL, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		unsigned m = 0;
		int bad = !eq;
		if (!bad) {
			*eq++ = 0;
			if (!strcmp(tok, "uuid"))
				bad = copy_bounded(d->uuid, sizeof d->uuid, eq);
			else if (!strcmp(tok, "total"))
				bad = parse_u64(eq, &d->total);
			else if (!strcmp(tok, "base"))
				bad = parse_u64(eq, &d->base);
			else if (!strcmp(tok, "mig")) {
				bad = parse_uint(eq, 1, &m);
				d->mig = (int)m;
			}
			else if (!strcmp(tok, "clock"))
				bad = parse_uint(eq, 100000, &d->clock_mhz);
			else if (!strcmp(tok, "power"))
				bad = parse_uint(eq, 10000000, &d->power_mw);
			else if (!strcmp(tok, "unsupported"))
				bad = parse_queries(eq, &d->unsupported);
			else if (!strcmp(tok, "deny"))
				bad = parse_queries(eq, &d->denied);
			else
				bad = 1;
		}
		if (bad) {
			complain(line, "bad device field");
			return -1;
		}
	}
	/* A MIG-enabled GPU answers neither device nor process utilization. */
	if (d->mig)
		d->unsupported |= Q_UTIL | Q_PUTIL;
	S.ndev++;
	return 0;
}

static int parse_step(char *rest, int line)
{
	char *save = NULL, *kind = strtok_r(rest, " \t", &save), *arg = strtok_r(NULL, " \t", &save);
	if (S.nsteps >= MAX_STEPS || !kind || !arg || strtok_r(NULL, " \t", &save)) {
		complain(line, "want: step at MS | step on PHASE (and at most 64 steps)");
		return -1;
	}
	struct step *st = &S.steps[S.nsteps];
	unsigned long long ms;
	st->at_ms = -1;
	if (!strcmp(kind, "at") && !parse_u64(arg, &ms) && ms < 86400000ULL)
		st->at_ms = (long)ms;
	else if (strcmp(kind, "on") || copy_bounded(st->phase, sizeof st->phase, arg)) {
		complain(line, "bad step");
		return -1;
	}
	S.nsteps++;
	return 0;
}

static struct event *new_event(int line, const char *devs)
{
	unsigned long long dev;
	if (S.nsteps == 0 || S.nevents >= MAX_EVENTS) {
		complain(line, "proc and lost belong to a step (at most 256 of them)");
		return NULL;
	}
	if (!devs || parse_u64(devs, &dev) || dev >= (unsigned long long)S.ndev) {
		complain(line, "no such device");
		return NULL;
	}
	struct event *e = &S.events[S.nevents++];
	memset(e, 0, sizeof *e);
	e->step = S.nsteps - 1;
	e->dev = (int)dev;
	return e;
}

/* parse_proc: proc DEV COMM mem=BYTES sm=PCT memutil=PCT */
static int parse_proc(char *rest, int line)
{
	char *save = NULL, *devs = strtok_r(rest, " \t", &save), *comm = strtok_r(NULL, " \t", &save);
	struct event *e = new_event(line, devs);
	if (!e)
		return -1;
	if (!comm || copy_bounded(e->comm, sizeof e->comm, comm)) {
		complain(line, "proc needs a command name of at most 15 bytes");
		return -1;
	}
	for (char *tok = strtok_r(NULL, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		int bad = !eq;
		if (!bad) {
			*eq++ = 0;
			if (!strcmp(tok, "mem"))
				bad = parse_u64(eq, &e->mem);
			else if (!strcmp(tok, "sm"))
				bad = parse_pct(eq, &e->sm);
			else if (!strcmp(tok, "memutil"))
				bad = parse_pct(eq, &e->memutil);
			else
				bad = 1;
		}
		if (bad) {
			complain(line, "bad proc field");
			return -1;
		}
	}
	return 0;
}

static int parse_line(char *l, int line)
{
	size_t n = strlen(l);
	while (n && isspace((unsigned char)l[n - 1]))
		l[--n] = 0;
	while (isspace((unsigned char)*l))
		l++;
	if (!*l || *l == '#')
		return 0;
	char *rest = l + strcspn(l, " \t");
	if (*rest)
		*rest++ = 0;
	if (!strcmp(l, "init"))
		return parse_init(rest) ? (complain(line, "bad init"), -1) : 0;
	if (!strcmp(l, "device"))
		return parse_device(rest, line);
	if (!strcmp(l, "step"))
		return parse_step(rest, line);
	if (!strcmp(l, "proc"))
		return parse_proc(rest, line);
	if (!strcmp(l, "lost")) {
		struct event *e = new_event(line, rest);
		if (!e)
			return -1;
		e->lost = 1;
		return 0;
	}
	complain(line, "unknown directive");
	return -1;
}

static nvmlReturn_t load(void)
{
	if (S.loaded)
		return S.init_ret;
	S.loaded = 1;
	S.init_ret = NVML_SUCCESS;
	const char *path = getenv("FAKE_NVML_SCENARIO");
	if (!path || !*path) {
		/* No scenario is no driver: what a machine without one says. */
		S.init_ret = NVML_ERROR_DRIVER_NOT_LOADED;
		return S.init_ret;
	}
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "fake-nvml: %s: %s\n", path, strerror(errno));
		S.init_ret = NVML_ERROR_UNKNOWN;
		return S.init_ret;
	}
	char buf[MAX_LINE];
	int line = 0, bad = 0;
	while (!bad && fgets(buf, sizeof buf, f)) {
		line++;
		if (line > MAX_LINES || (!strchr(buf, '\n') && !feof(f))) {
			complain(line, "line too long or too many lines");
			bad = 1;
			break;
		}
		bad = parse_line(buf, line) != 0;
	}
	fclose(f);
	if (bad) {
		S.init_ret = NVML_ERROR_UNKNOWN;
		return S.init_ret;
	}
	const char *pf = getenv("FAKE_NVML_PHASE");
	if (pf && copy_bounded(S.phase_file, sizeof S.phase_file - 8, pf))
		S.phase_file[0] = 0;
	clock_gettime(CLOCK_MONOTONIC, &S.t0);
	return S.init_ret;
}

/* read_phase reads the phase file's first line into out (empty if none). */
static void read_phase(char *out, size_t n)
{
	out[0] = 0;
	if (!S.phase_file[0])
		return;
	int fd = open(S.phase_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	ssize_t r = read(fd, out, n - 1);
	close(fd);
	out[r > 0 ? r : 0] = 0;
	out[strcspn(out, "\r\n")] = 0;
}

/* current_step fires the steps whose trigger has come and returns the
 * last fired one (-1: none yet). Firing is sticky. */
static int current_step(void)
{
	struct timespec now;
	char phase[PHASE_LEN];
	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (now.tv_sec - S.t0.tv_sec) * 1000 + (now.tv_nsec - S.t0.tv_nsec) / 1000000;
	read_phase(phase, sizeof phase);
	int cur = -1;
	for (int i = 0; i < S.nsteps; i++) {
		struct step *st = &S.steps[i];
		if (!st->fired)
			st->fired = st->at_ms >= 0 ? ms >= st->at_ms : (phase[0] && !strcmp(phase, st->phase));
		if (st->fired)
			cur = i;
	}
	return cur;
}

static int dev_lost(const struct nvmlDevice_st *d, int step)
{
	for (int i = 0; i < S.nevents; i++)
		if (S.events[i].lost && S.events[i].dev == d->index && S.events[i].step <= step)
			return 1;
	return 0;
}

/* setting is the latest setting of comm on d at step (NULL: none). */
static const struct event *setting(const struct nvmlDevice_st *d, const char *comm, int step)
{
	const struct event *best = NULL;
	for (int i = 0; i < S.nevents; i++) {
		const struct event *e = &S.events[i];
		if (!e->lost && e->dev == d->index && e->step <= step && !strcmp(e->comm, comm))
			best = e;
	}
	return best;
}

static int read_comm(unsigned long long pid, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%llu/comm", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, out, n - 1);
	close(fd);
	if (r <= 0)
		return -1;
	out[r] = 0;
	out[strcspn(out, "\n")] = 0;
	return 0;
}

/* procs lists the live processes d has at step: those whose comm has a
 * setting with memory or utilization. At most max. */
static int procs(const struct nvmlDevice_st *d, int step, struct proc *out, int max)
{
	DIR *dir = opendir("/proc");
	if (!dir)
		return 0;
	int n = 0;
	struct dirent *de;
	while (n < max && (de = readdir(dir))) {
		char comm[COMM_LEN + 2];
		unsigned long long pid;
		if (parse_u64(de->d_name, &pid) || pid > 0x7fffffff || read_comm(pid, comm, sizeof comm))
			continue;
		const struct event *e = setting(d, comm, step);
		if (!e || (!e->mem && !e->sm))
			continue;
		out[n].pid = (unsigned)pid;
		out[n].mem = e->mem;
		out[n].sm = e->sm;
		out[n].memutil = e->memutil;
		n++;
	}
	closedir(dir);
	return n;
}

/* ack writes "PHASE COUNT" to the phase file + ".ack" at each memory
 * query, so a workload can wait until its phase has been sampled. */
static void ack(void)
{
	char phase[PHASE_LEN], tmp[600], dst[600];
	if (!S.phase_file[0])
		return;
	read_phase(phase, sizeof phase);
	if (strcmp(phase, S.last_phase)) {
		memcpy(S.last_phase, phase, sizeof phase);
		S.acks = 0;
	}
	S.acks++;
	snprintf(dst, sizeof dst, "%s.ack", S.phase_file);
	snprintf(tmp, sizeof tmp, "%s.ack.tmp", S.phase_file);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return;
	char line[PHASE_LEN + 32];
	int l = snprintf(line, sizeof line, "%s %lu\n", phase, S.acks);
	ssize_t w = write(fd, line, (size_t)l);
	close(fd);
	if (w == l)
		rename(tmp, dst);
}

/* check answers what every device query answers first. */
static nvmlReturn_t check(struct nvmlDevice_st *d, unsigned query, int *step)
{
	if (!S.inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!d || d < S.dev || d >= S.dev + S.ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	*step = current_step();
	if (dev_lost(d, *step)) {
		/* Whichever query meets the loss acknowledges it: the sampler
		 * asks a lost GPU nothing more. */
		ack();
		return NVML_ERROR_GPU_IS_LOST;
	}
	if (d->unsupported & query)
		return NVML_ERROR_NOT_SUPPORTED;
	if (d->denied & query)
		return NVML_ERROR_NO_PERMISSION;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	nvmlReturn_t r = load();
	if (r == NVML_SUCCESS)
		S.inited++;
	return r;
}

EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
	if (!S.inited)
		return NVML_ERROR_UNINITIALIZED;
	S.inited--;
	return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
	default: return "Unknown Error";
	}
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!S.inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned)S.ndev;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!S.inited)
		return NVML_ERROR_UNINITIALIZED;
	if (!device || index >= (unsigned)S.ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	device->handle = &S.dev[index];
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t copy_string(char *dst, unsigned int n, const char *src)
{
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(src) >= n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(dst, src);
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dh, char *name, unsigned int n)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	nvmlReturn_t r = check(d, 0, &step);
	return r ? r : copy_string(name, n, d->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dh, char *uuid, unsigned int n)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	nvmlReturn_t r = check(d, 0, &step);
	return r ? r : copy_string(uuid, n, d->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dh, nvmlMemory_t *m)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	struct proc p[MAX_PIDS];
	ack();
	nvmlReturn_t r = check(d, Q_MEM, &step);
	if (r)
		return r;
	if (!m)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned long long used = d->base;
	int n = procs(d, step, p, MAX_PIDS);
	for (int i = 0; i < n; i++)
		used += p[i].mem;
	m->total = d->total;
	m->used = used < d->total ? used : d->total;
	m->free = d->total - m->used;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dh, nvmlUtilization_t *u)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	struct proc p[MAX_PIDS];
	nvmlReturn_t r = check(d, Q_UTIL, &step);
	if (r)
		return r;
	if (!u)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned int sm = 0, mu = 0;
	int n = procs(d, step, p, MAX_PIDS);
	for (int i = 0; i < n; i++)
		sm += p[i].sm, mu += p[i].memutil;
	u->gpu = sm > 100 ? 100 : sm;
	u->memory = mu > 100 ? 100 : mu;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dh, nvmlClockType_t type, unsigned int *clock)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	nvmlReturn_t r = check(d, Q_CLOCK, &step);
	if (r)
		return r;
	if (!clock || type >= NVML_CLOCK_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	*clock = d->clock_mhz;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dh, unsigned int *power)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	nvmlReturn_t r = check(d, Q_POWER, &step);
	if (r)
		return r;
	if (!power)
		return NVML_ERROR_INVALID_ARGUMENT;
	*power = d->power_mw;
	return NVML_SUCCESS;
}

/* running lists d's processes the way nvmlDeviceGet*RunningProcesses do:
 * with *count too small, INSUFFICIENT_SIZE and the count needed. */
static nvmlReturn_t running(struct nvmlDevice_st *d, unsigned int *count, void *infos, size_t size, int graphics)
{
	int step;
	struct proc p[MAX_PIDS];
	nvmlReturn_t r = check(d, Q_PROCS, &step);
	if (r)
		return r;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	/* The scripted work is compute work: the graphics list is empty. */
	int n = graphics ? 0 : procs(d, step, p, MAX_PIDS);
	if ((unsigned)n > *count) {
		*count = (unsigned)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (n && !infos)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < n; i++) {
		nvmlProcessInfo_v2_t v2 = {.pid = p[i].pid, .usedGpuMemory = p[i].mem,
			.gpuInstanceId = 0xFFFFFFFF, .computeInstanceId = 0xFFFFFFFF};
		memcpy((char *)infos + (size_t)i * size, &v2, size);
	}
	*count = (unsigned)n;
	return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_v2_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 1);
}

/* v1 entries are {pid, usedGpuMemory}: the first two fields of v2. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 0);
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t dh, unsigned int *c, nvmlProcessInfo_v1_t *i)
{
	return running(dh.handle, c, i, sizeof *i, 1);
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dh, nvmlProcessUtilizationSample_t *u,
	unsigned int *count, unsigned long long lastSeen)
{
	struct nvmlDevice_st *d = dh.handle;
	int step;
	struct proc p[MAX_PIDS];
	nvmlReturn_t r = check(d, Q_PUTIL, &step);
	if (r)
		return r;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	unsigned long long us = (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_nsec / 1000;
	int n = 0, all = procs(d, step, p, MAX_PIDS);
	for (int i = 0; i < all; i++)
		if (p[i].sm || p[i].memutil)
			p[n++] = p[i];
	if (us <= lastSeen || n == 0)
		return NVML_ERROR_NOT_FOUND;
	if (!u) {
		*count = (unsigned)n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	/* go-nvml sizes the buffer by a first call and slices the answer by
	 * the count the second returns: a process that appeared in between
	 * must not make that count larger than the buffer. */
	if ((unsigned)n > *count)
		n = (int)*count;
	for (int i = 0; i < n; i++) {
		memset(&u[i], 0, sizeof u[i]);
		u[i].pid = p[i].pid;
		u[i].timeStamp = us;
		u[i].smUtil = p[i].sm;
		u[i].memUtil = p[i].memutil;
	}
	*count = (unsigned)n;
	return NVML_SUCCESS;
}
