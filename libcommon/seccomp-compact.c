/* A shorter program with the same verdicts as one libseccomp emits.
 *
 * Loading a filter costs the kernel time in proportion to its length (the conversion to eBPF,
 * the JIT, the per-call-number cache it builds): dsec-exec pays it at every command. libseccomp
 * gives every allowed call a comparison of its own, so an allow-list of 300 calls becomes 500
 * instructions, where the allowed numbers form a few dozen runs. This rewrites the dispatch on
 * the call number as a binary search over those runs, found by running the original program:
 * while it compares only the architecture and the number against constants (JEQ, JGT, JGE),
 * its verdict is constant between consecutive constants, so running it at each constant and
 * the one after it gives the verdict for every number. Where a number's path goes on to the
 * arguments, the instructions reachable from there are copied as they are, in their order, so
 * those checks are libseccomp's own. Anything else in the dispatch (the X register, memory,
 * arithmetic on the number, RET A) leaves the program as it was. */
#include "seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

#define OFF_NR offsetof(struct seccomp_data, nr)
#define OFF_ARCH offsetof(struct seccomp_data, arch)
#define MAX_POINTS 4096

/* What the dispatch of a program does for one (arch, nr): a verdict, or a jump into the
 * argument checks at instruction entry. */
struct outcome {
	int block;      /* 1: go on at entry */
	uint32_t k;     /* verdict (block == 0) */
	unsigned entry; /* first instruction past the dispatch (block == 1) */
};

/* Run p's dispatch for arch and nr. 0 with *o set, -1 when the dispatch does something this
 * rewrite does not model. */
static int dispatch(const struct sock_fprog *p, uint32_t arch, uint32_t nr, struct outcome *o)
{
	uint32_t A = 0;
	unsigned pc = 0, steps = 0;

	while (pc < p->len && steps++ < p->len) {
		const struct sock_filter *f = &p->filter[pc];

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (f->k == OFF_NR)
				A = nr;
			else if (f->k == OFF_ARCH)
				A = arch;
			else {
				o->block = 1;
				o->entry = pc;
				return 0;
			}
			pc++;
			break;
		case BPF_JMP | BPF_JA:
			pc += 1 + f->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += 1 + (A == f->k ? f->jt : f->jf);
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			pc += 1 + (A > f->k ? f->jt : f->jf);
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += 1 + (A >= f->k ? f->jt : f->jf);
			break;
		case BPF_RET | BPF_K:
			o->block = 0;
			o->k = f->k;
			return 0;
		default:
			return -1;
		}
	}
	return -1;
}

static int same(const struct outcome *a, const struct outcome *b)
{
	return a->block == b->block && (a->block ? a->entry == b->entry : a->k == b->k);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

struct run {
	uint32_t lo; /* first number of the run (it ends where the next begins) */
	struct outcome o;
};

struct out {
	struct sock_filter *f;
	unsigned n;
};

static void emit(struct out *w, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (w->n < BPF_MAXINSNS)
		w->f[w->n] = (struct sock_filter){code, jt, jf, k};
	w->n++;
}

/* Size of the search over runs [a, b): one JGE per inner node, one instruction per leaf (a RET,
 * or a JA into the copied checks). */
static unsigned tree_size(unsigned a, unsigned b)
{
	return 2 * (b - a) - 1;
}

/* The search over runs [a, b), its leaves' JAs to be fixed by the caller once the copied
 * checks have their place: ja[i] is the index of the JA for run i (or ~0u). */
static void tree(struct out *w, const struct run *r, unsigned a, unsigned b, unsigned *ja)
{
	unsigned m, left;

	if (b - a == 1) {
		if (r[a].o.block) {
			ja[a] = w->n;
			emit(w, BPF_JMP | BPF_JA, 0, 0, 0);
		} else {
			emit(w, BPF_RET | BPF_K, 0, 0, r[a].o.k);
		}
		return;
	}
	m = a + (b - a) / 2;
	left = tree_size(a, m);
	/* A >= start of run m: the right half, past the left one */
	emit(w, BPF_JMP | BPF_JGE | BPF_K, (uint8_t)left, 0, r[m].lo);
	tree(w, r, a, m, ja);
	tree(w, r, m, b, ja);
}

/* Mark what is reachable from pc in p (the argument checks). -1 when an instruction is not
 * one the copy can keep as it is. */
static int reach(const struct sock_fprog *p, unsigned pc, unsigned char *mark)
{
	for (; pc < p->len && !mark[pc]; pc++) {
		const struct sock_filter *f = &p->filter[pc];
		unsigned cls = BPF_CLASS(f->code);

		mark[pc] = 1;
		if (cls == BPF_RET) {
			if (BPF_RVAL(f->code) != BPF_K)
				return -1;
			return 0;
		}
		if (cls == BPF_JMP) {
			if (BPF_OP(f->code) == BPF_JA) {
				if (f->k >= p->len - pc - 1)
					return -1;
				pc += f->k;
				continue;
			}
			if (BPF_SRC(f->code) != BPF_K || pc + 1 + f->jt >= p->len ||
			    pc + 1 + f->jf >= p->len || reach(p, pc + 1 + f->jt, mark) < 0)
				return -1;
			pc += f->jf;
			continue;
		}
		/* loads of the call's data, and arithmetic on A with constants */
		if (!(f->code == (BPF_LD | BPF_W | BPF_ABS) ||
		      (cls == BPF_ALU && BPF_SRC(f->code) == BPF_K)))
			return -1;
	}
	return pc < p->len ? 0 : -1;
}

/* ---- argument checks that spare a few values of one word ----
 *
 * libseccomp cannot say "allow unless the argument is one of these": seccomp.c spells it as a
 * rule per bit the values share (allow when that bit differs) and one per other combination of
 * the bits where they differ, three instructions each: ioctl's "not TIOCSTI nor TIOCLINUX" is
 * 100 instructions, a third of the default program. Where a number's checks read one 32-bit
 * word W of the call's data (other words only masked to nothing) and give one verdict to every
 * value of W but at most MAX_EXC of them, those checks become: load W, a JEQ for each exception,
 * its RET, and the common RET. The verdicts are found by the checks themselves, run over
 * prefixes of W's bits from the top: where the bits known so far decide every comparison on
 * the way to a RET, the verdict holds for all values with that prefix and no more bits are
 * split. */
#define MAX_EXC 16
#define MAX_SPLITS 8192

/* A's value in a partial run: a constant, W & mask, or something else (another word). */
enum { V_CONST, V_W, V_OTHER };
struct aval {
	int kind;
	uint32_t v; /* V_CONST: the value; V_W: the mask */
};

struct wscan {
	const struct sock_fprog *p;
	unsigned entry;
	uint32_t off;         /* W's offset in struct seccomp_data */
	uint32_t known, bits; /* the bits of W fixed so far, and their values */
	uint32_t def;         /* the verdict of all but the exceptions (valid once have_def) */
	int have_def, n, splits;
	uint32_t exc[MAX_EXC], exck[MAX_EXC];
};

/* Does the comparison code/k on A hold: 1, 0, or -1 when the known bits do not decide it
 * (-2: it is not one this scan models). */
static int wcmp(const struct wscan *s, const struct aval *a, uint16_t code, uint32_t k)
{
	uint32_t lo, hi;

	if (a->kind == V_OTHER || BPF_SRC(code) != BPF_K)
		return -2;
	if (a->kind == V_CONST) {
		lo = hi = a->v;
	} else {
		lo = s->bits & s->known & a->v;
		hi = lo | (a->v & ~s->known);
	}
	switch (BPF_OP(code)) {
	case BPF_JEQ:
		if (lo == hi)
			return lo == k;
		if (a->kind == V_W && ((k & ~a->v) || ((s->bits ^ k) & a->v & s->known)))
			return 0;
		return -1;
	case BPF_JGT:
		return lo > k ? 1 : hi <= k ? 0 : -1;
	case BPF_JGE:
		return lo >= k ? 1 : hi < k ? 0 : -1;
	case BPF_JSET:
		return (lo & k) ? 1 : !(hi & k) ? 0 : -1;
	}
	return -2;
}

/* Run the checks from pc with what is known of W: 0 with *ret set, 1 when undecided, -1 when
 * they do something this scan does not model. A comparison the known bits do not decide is
 * followed both ways: decided when both give one verdict. *budget bounds the instructions run
 * (undecided when spent: the caller then splits another bit). */
static int wrun(const struct wscan *s, unsigned pc, struct aval a, uint32_t *ret, unsigned *budget)
{
	const struct sock_fprog *p = s->p;
	uint32_t k1, k2;
	int r, r1, r2;

	while (pc < p->len) {
		const struct sock_filter *f = &p->filter[pc];

		if (!*budget)
			return 1;
		--*budget;
		if (f->code == (BPF_LD | BPF_W | BPF_ABS)) {
			a.kind = f->k == s->off ? V_W : V_OTHER;
			a.v = 0xffffffff;
			pc++;
		} else if (f->code == (BPF_ALU | BPF_AND | BPF_K)) {
			if (a.kind == V_CONST || f->k == 0)
				a = (struct aval){V_CONST, a.kind == V_CONST ? a.v & f->k : 0};
			else
				a.v &= f->k;
			pc++;
		} else if (f->code == (BPF_JMP | BPF_JA)) {
			pc += 1 + f->k;
		} else if (BPF_CLASS(f->code) == BPF_JMP) {
			r = wcmp(s, &a, f->code, f->k);
			if (r < -1)
				return -1;
			if (r >= 0) {
				pc += 1 + (r ? f->jt : f->jf);
				continue;
			}
			r1 = wrun(s, pc + 1 + f->jt, a, &k1, budget);
			if (r1 < 0)
				return -1;
			r2 = wrun(s, pc + 1 + f->jf, a, &k2, budget);
			if (r2 < 0)
				return -1;
			if (r1 || r2 || k1 != k2)
				return 1;
			*ret = k1;
			return 0;
		} else if (f->code == (BPF_RET | BPF_K)) {
			*ret = f->k;
			return 0;
		} else {
			return -1;
		}
	}
	return -1;
}

/* Split W's values from bit `bit` down. 0, or -1 when the checks are not of the kind sought. */
static int wsplit(struct wscan *s, int bit)
{
	uint32_t k;
	int r;
	unsigned budget = 4096;

	if (++s->splits > MAX_SPLITS)
		return -1;
	r = wrun(s, s->entry, (struct aval){V_OTHER, 0}, &k, &budget);
	if (r < 0 || (r > 0 && bit < 0))
		return -1;
	if (r == 0) {
		if (bit >= 0 || (s->have_def && k == s->def)) {
			/* a range of values (or one with the common verdict) */
			if (s->have_def && k != s->def)
				return -1;
			if (bit >= 0) {
				s->def = k;
				s->have_def = 1;
			}
			return 0;
		}
		if (s->n == MAX_EXC)
			return -1;
		s->exc[s->n] = s->bits;
		s->exck[s->n++] = k;
		return 0;
	}
	s->known |= 1u << bit;
	s->bits &= ~(1u << bit);
	if (wsplit(s, bit - 1) < 0)
		return -1;
	s->bits |= 1u << bit;
	r = wsplit(s, bit - 1);
	s->known &= ~(1u << bit);
	s->bits &= ~(1u << bit);
	return r;
}

/* Are the checks at entry "one verdict but for a few values of one word"? 0 with *s filled.
 * tmp: scratch of p->len bytes. */
static int wscan(const struct sock_fprog *p, unsigned entry, struct wscan *s, unsigned char *tmp)
{
	uint32_t off;
	unsigned pc;
	int i, n;

	memset(tmp, 0, p->len);
	if (reach(p, entry, tmp) < 0)
		return -1;
	/* W: each word of the arguments the checks load, in turn */
	for (off = offsetof(struct seccomp_data, args); off < sizeof(struct seccomp_data);
	     off += 4) {
		for (pc = entry; pc < p->len; pc++)
			if (tmp[pc] && p->filter[pc].code == (BPF_LD | BPF_W | BPF_ABS) &&
			    p->filter[pc].k == off)
				break;
		if (pc == p->len)
			continue;
		memset(s, 0, sizeof(*s));
		s->p = p;
		s->entry = entry;
		s->off = off;
		if (wsplit(s, 31) < 0 || !s->have_def)
			continue;
		/* exceptions met before the common verdict was known may share it */
		for (n = 0, i = 0; i < s->n; i++)
			if (s->exck[i] != s->def) {
				s->exc[n] = s->exc[i];
				s->exck[n++] = s->exck[i];
			}
		s->n = n;
		if (n > 0)
			return 0;
	}
	return -1;
}

/* The instructions scan s stands for: 2 per exception, a load and the common RET. */
static unsigned wsize(const struct wscan *s)
{
	return 2 * (unsigned)s->n + 2;
}

static void wemit(struct out *w, const struct wscan *s)
{
	int i;

	emit(w, BPF_LD | BPF_W | BPF_ABS, 0, 0, s->off);
	for (i = 0; i < s->n; i++)
		emit(w, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)s->n, 0, s->exc[i]);
	emit(w, BPF_RET | BPF_K, 0, 0, s->def);
	for (i = 0; i < s->n; i++)
		emit(w, BPF_RET | BPF_K, 0, 0, s->exck[i]);
}

/* How many instructions the checks at entry reach (0 when reach refuses them). */
static unsigned reach_size(const struct sock_fprog *p, unsigned entry, unsigned char *tmp)
{
	unsigned i, n = 0;

	memset(tmp, 0, p->len);
	if (reach(p, entry, tmp) < 0)
		return 0;
	for (i = 0; i < p->len; i++)
		n += tmp[i];
	return n;
}

int dsec_seccomp_compact(const struct sock_fprog *in, struct sock_fprog *out, struct dsec_err *err)
{
#ifdef NATIVE_ARCH
	static const uint32_t foreign[] = {
	    AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, 0, 0xffffffff};
	uint32_t *pt = NULL;
	struct run *runs = NULL;
	unsigned char *mark = NULL, *tmp = NULL;
	unsigned *ja = NULL, *newpos = NULL, npt = 0, nrun = 0, i, j, copied;
	struct wscan *ws = NULL; /* per run: its checks rewritten (n > 0), or kept (n == 0) */
	struct outcome o, fo;
	struct out w = {0};
	int rc = 1;

	out->len = 0;
	out->filter = NULL;
	if (!in->len || in->filter[0].code != (BPF_LD | BPF_W | BPF_ABS) ||
	    in->filter[0].k != OFF_ARCH)
		return 1;
	pt = malloc(MAX_POINTS * sizeof(*pt));
	runs = malloc(MAX_POINTS * sizeof(*runs));
	mark = calloc(in->len, 1);
	ja = malloc(MAX_POINTS * sizeof(*ja));
	newpos = malloc(in->len * sizeof(*newpos));
	tmp = malloc(in->len);
	w.f = calloc(BPF_MAXINSNS, sizeof(*w.f));
	if (!pt || !runs || !mark || !ja || !newpos || !tmp || !w.f) {
		rc = dsec_err_set(err, ENOMEM, "compact seccomp filter: out of memory");
		goto done;
	}
	/* every constant the dispatch compares with, and the number after it */
	pt[npt++] = 0;
	for (i = 0; i < in->len; i++) {
		const struct sock_filter *f = &in->filter[i];

		if (BPF_CLASS(f->code) != BPF_JMP || BPF_OP(f->code) == BPF_JA)
			continue;
		if (npt + 2 > MAX_POINTS)
			goto done;
		pt[npt++] = f->k;
		if (f->k != 0xffffffff)
			pt[npt++] = f->k + 1;
	}
	qsort(pt, npt, sizeof(*pt), cmp_u32);
	/* foreign architectures: one verdict, whatever the number */
	if (dispatch(in, foreign[0] == NATIVE_ARCH ? foreign[1] : foreign[0], 0, &fo) < 0 ||
	    fo.block)
		goto done;
	for (i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		if (foreign[i] == NATIVE_ARCH)
			continue;
		for (j = 0; j < npt; j++)
			if (dispatch(in, foreign[i], pt[j], &o) < 0 || !same(&o, &fo))
				goto done;
	}
	/* the native architecture: runs of numbers with one outcome */
	for (j = 0; j < npt; j++) {
		if (j && pt[j] == pt[j - 1])
			continue;
		if (dispatch(in, NATIVE_ARCH, pt[j], &o) < 0)
			goto done;
		if (nrun && same(&runs[nrun - 1].o, &o))
			continue;
		runs[nrun].lo = pt[j];
		runs[nrun++].o = o;
	}
	ws = calloc(nrun ? nrun : 1, sizeof(*ws));
	if (!ws) {
		rc = dsec_err_set(err, ENOMEM, "compact seccomp filter: out of memory");
		goto done;
	}
	for (i = 0; i < nrun; i++) {
		if (!runs[i].o.block)
			continue;
		for (j = 0; j < i && !(runs[j].o.block && runs[j].o.entry == runs[i].o.entry); j++)
			;
		if (j < i)
			ws[i] = ws[j];
		else if (wscan(in, runs[i].o.entry, &ws[i], tmp) < 0 ||
			 wsize(&ws[i]) >= reach_size(in, runs[i].o.entry, tmp))
			ws[i].n = 0;
		if (!ws[i].n && reach(in, runs[i].o.entry, mark) < 0)
			goto done;
	}
	/* the new program: architecture, number, search, then the copied checks */
	emit(&w, BPF_LD | BPF_W | BPF_ABS, 0, 0, OFF_ARCH);
	emit(&w, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, NATIVE_ARCH);
	emit(&w, BPF_RET | BPF_K, 0, 0, fo.k);
	emit(&w, BPF_LD | BPF_W | BPF_ABS, 0, 0, OFF_NR);
	if (nrun > 256) /* the jump over the largest left half must fit in 8 bits */
		goto done;
	for (i = 0; i < nrun; i++)
		ja[i] = ~0u;
	tree(&w, runs, 0, nrun, ja);
	for (copied = 0, i = 0; i < in->len; i++)
		if (mark[i])
			newpos[i] = w.n + copied++;
	for (i = 0; i < in->len; i++) {
		struct sock_filter f = in->filter[i];

		if (!mark[i])
			continue;
		if (BPF_CLASS(f.code) == BPF_JMP) {
			if (BPF_OP(f.code) == BPF_JA) {
				f.k = newpos[i + 1 + f.k] - newpos[i] - 1;
			} else {
				f.jt = (uint8_t)(newpos[i + 1 + f.jt] - newpos[i] - 1);
				f.jf = (uint8_t)(newpos[i + 1 + f.jf] - newpos[i] - 1);
			}
		}
		emit(&w, f.code, f.jt, f.jf, f.k);
	}
	for (i = 0; i < nrun; i++) {
		if (ja[i] == ~0u)
			continue;
		if (!ws[i].n) {
			w.f[ja[i]].k = newpos[runs[i].o.entry] - ja[i] - 1;
			continue;
		}
		/* rewritten checks: after the copied ones, once per entry */
		for (j = 0; j < i && !(ws[j].n && runs[j].o.entry == runs[i].o.entry); j++)
			;
		if (j < i) {
			w.f[ja[i]].k = w.f[ja[j]].k + ja[j] - ja[i];
			continue;
		}
		w.f[ja[i]].k = w.n - ja[i] - 1;
		wemit(&w, &ws[i]);
	}
	/* the kernel takes only programs that end in a RET (never reached if it is added here) */
	if (w.n <= BPF_MAXINSNS && BPF_CLASS(w.f[w.n - 1].code) != BPF_RET)
		emit(&w, BPF_RET | BPF_K, 0, 0, fo.k);
	if (w.n > BPF_MAXINSNS || w.n >= in->len)
		goto done;
	out->filter = realloc(w.f, w.n * sizeof(*w.f));
	if (!out->filter)
		out->filter = w.f;
	out->len = (unsigned short)w.n;
	w.f = NULL;
	rc = 0;
done:
	free(pt);
	free(runs);
	free(mark);
	free(ja);
	free(newpos);
	free(tmp);
	free(ws);
	free(w.f);
	return rc;
#else
	(void)in;
	(void)err;
	out->len = 0;
	out->filter = NULL;
	return 1;
#endif
}
