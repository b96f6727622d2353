/* SPDX-License-Identifier: MIT */
/* recorder.c - -o record=PATH (see recorder.h). */
#include "profile/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/array.h"
#include "common/log.h"
#include "lsq/error.h"
#include "profile/profile.h"

#define SHARDS 64u
#define ROOT_ID 1u          /* FUSE_ROOT_ID */
#define MAX_DEPTH 4096u     /* a deeper chain is a loop (hostile image) */
/* Files past this many granules are tracked in coarser units. */
#define MAX_BITS (1u << 20)

struct node {
	uint64_t ino;
	uint64_t parent;     /* 0: name unknown */
	char *name;
	uint64_t seq;        /* order of the first read; 0: never read */
	uint64_t size;       /* file size at the first read */
	uint64_t granule;    /* bytes per bit */
	uint64_t *bits;      /* granules read */
	struct node *next;   /* hash chain */
};

struct shard {
	pthread_mutex_t lock;
	struct node **buckets;
	size_t nbuckets, count;
};

struct lsq_recorder {
	int fd;              /* -1: learning, no file */
	char *path;
	uint32_t granule;
	atomic_uint_least64_t next_seq;
	/* bounds (learning only; 0: none): files whose first read is
	 * recorded, nodes named */
	uint64_t max_files;
	unsigned max_nodes;
	atomic_uint nodes;
	struct shard shards[SHARDS];
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	return x ^ (x >> 33);
}

static struct shard *shard_of(struct lsq_recorder *rec, uint64_t h)
{
	return &rec->shards[h % SHARDS];
}

/* The node of ino in s (locked), created when missing; NULL without
 * memory. */
static struct node *node_get(struct shard *s, uint64_t ino, uint64_t h)
{
	struct node *n;
	size_t b;

	if (s->nbuckets) {
		for (n = s->buckets[(h / SHARDS) & (s->nbuckets - 1)]; n;
		     n = n->next)
			if (n->ino == ino)
				return n;
	}
	if (s->count >= s->nbuckets) {
		size_t nb = s->nbuckets ? 2 * s->nbuckets : 64;
		struct node **t = calloc(nb, sizeof(*t));

		if (!t)
			return NULL;
		for (size_t i = 0; i < s->nbuckets; i++) {
			struct node *next;

			for (n = s->buckets[i]; n; n = next) {
				next = n->next;
				b = (mix(n->ino) / SHARDS) & (nb - 1);
				n->next = t[b];
				t[b] = n;
			}
		}
		free(s->buckets);
		s->buckets = t;
		s->nbuckets = nb;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = ino;
	b = (h / SHARDS) & (s->nbuckets - 1);
	n->next = s->buckets[b];
	s->buckets[b] = n;
	s->count++;
	return n;
}

int lsq_recorder_create(const char *path, struct lsq_recorder **out)
{
	struct lsq_recorder *rec;
	int ret = lsq_recorder_create_learning(0, 0, &rec), e;

	if (ret)
		return ret;
	rec->path = strdup(path);
	if (rec->path)
		rec->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (rec->fd < 0) {
		e = errno;
		ret = rec->path ? LSQ_ERR_IO : LSQ_ERR_NOMEM;
		lsq_recorder_finish(rec, false);  /* frees it, writes nothing */
		errno = e;
		return ret;
	}
	*out = rec;
	return LSQ_OK;
}

int lsq_recorder_create_learning(unsigned max_files, unsigned max_nodes,
				 struct lsq_recorder **out)
{
	struct lsq_recorder *rec = calloc(1, sizeof(*rec));

	if (!rec)
		return LSQ_ERR_NOMEM;
	rec->fd = -1;
	rec->granule = 4096;
	rec->max_files = max_files;
	rec->max_nodes = max_nodes;
	atomic_init(&rec->next_seq, 1);
	for (unsigned i = 0; i < SHARDS; i++)
		pthread_mutex_init(&rec->shards[i].lock, NULL);
	*out = rec;
	return LSQ_OK;
}

void lsq_recorder_set_granule(struct lsq_recorder *rec, uint32_t granule)
{
	if (granule)
		rec->granule = granule;
}

void lsq_recorder_name(struct lsq_recorder *rec, uint64_t parent,
		       const char *name, size_t name_len, uint64_t child)
{
	uint64_t h = mix(child);
	struct shard *s = shard_of(rec, h);
	struct node *n;

	if (child == ROOT_ID || child == 0)
		return;
	/* a learning recorder's bound: a walk of a huge tree costs no more */
	if (rec->max_nodes &&
	    atomic_load_explicit(&rec->nodes, memory_order_relaxed) >=
		    rec->max_nodes)
		return;
	pthread_mutex_lock(&s->lock);
	n = node_get(s, child, h);
	/* the first name wins: hardlinks need only one */
	if (n && !n->name) {
		n->name = strndup(name, name_len);
		if (n->name) {
			n->parent = parent;
			atomic_fetch_add_explicit(&rec->nodes, 1,
						  memory_order_relaxed);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* First read of n: size its bitmap and take its place in the order. */
static void first_read(struct lsq_recorder *rec, struct node *n,
		       uint64_t file_size)
{
	uint64_t g = rec->granule, nbits;

	if (rec->max_files &&
	    atomic_load_explicit(&rec->next_seq, memory_order_relaxed) >
		    rec->max_files)
		return;  /* learning: the start is over */
	while (g && (file_size + g - 1) / g > MAX_BITS)
		g *= 2;
	nbits = g ? (file_size + g - 1) / g : 0;
	n->bits = calloc(nbits / 64 + 1, sizeof(uint64_t));
	if (!n->bits)
		return;
	n->size = file_size;
	n->granule = g;
	n->seq = atomic_fetch_add_explicit(&rec->next_seq, 1,
					   memory_order_relaxed);
}

void lsq_recorder_read(struct lsq_recorder *rec, uint64_t ino,
		       uint64_t file_size, uint64_t off, uint64_t len)
{
	uint64_t h = mix(ino);
	struct shard *s = shard_of(rec, h);
	struct node *n;

	if (len == 0 || file_size == 0 || off >= file_size)
		return;
	pthread_mutex_lock(&s->lock);
	n = node_get(s, ino, h);
	if (n && !n->seq)
		first_read(rec, n, file_size);
	if (n && n->seq) {
		uint64_t end = off + len < n->size ? off + len : n->size;

		for (uint64_t i = off / n->granule;
		     i * n->granule < end; i++)
			n->bits[i / 64] |= UINT64_C(1) << (i % 64);
	}
	pthread_mutex_unlock(&s->lock);
}

static struct node *node_find(struct lsq_recorder *rec, uint64_t ino)
{
	uint64_t h = mix(ino);
	struct shard *s = shard_of(rec, h);
	struct node *n;

	if (!s->nbuckets)
		return NULL;
	for (n = s->buckets[(h / SHARDS) & (s->nbuckets - 1)]; n; n = n->next)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* n's path from the root into buf ("a/b/c"); false when a name on the way
 * is unknown, the chain is too deep or buf too small. */
static bool path_of(struct lsq_recorder *rec, const struct node *n,
		    char *buf, size_t size)
{
	const struct node *chain[MAX_DEPTH];
	size_t depth = 0, len = 0;

	while (n && n->name && depth < MAX_DEPTH) {
		chain[depth++] = n;
		if (n->parent == ROOT_ID)
			break;
		n = node_find(rec, n->parent);
	}
	if (depth == 0 || chain[depth - 1]->parent != ROOT_ID)
		return false;
	while (depth--) {
		size_t nl = strlen(chain[depth]->name);

		if (len + nl + 2 > size)
			return false;
		memcpy(buf + len, chain[depth]->name, nl);
		len += nl;
		buf[len++] = depth ? '/' : '\0';
	}
	return true;
}

/* The granules read, as byte ranges; none when the whole file was read. */
static size_t ranges_of(const struct node *n, struct lsq_profile_range **out)
{
	uint64_t nbits = (n->size + n->granule - 1) / n->granule;
	struct lsq_profile_range *r = NULL;
	size_t count = 0, cap = 0;

	for (uint64_t i = 0; i < nbits;) {
		uint64_t j;

		if (!(n->bits[i / 64] >> (i % 64) & 1)) {
			i++;
			continue;
		}
		for (j = i; j < nbits && (n->bits[j / 64] >> (j % 64) & 1);
		     j++)
			;
		if (i == 0 && j == nbits)
			break;  /* all of it */
		if (!LSQ_ARRAY_RESERVE(r, cap, count, 8))
			break;  /* fewer ranges: a hint all the same */
		r[count].first = i * n->granule;
		r[count].last = (j * n->granule < n->size ? j * n->granule
							  : n->size) - 1;
		count++;
		i = j;
	}
	*out = r;
	return count;
}

static int by_seq(const void *a, const void *b)
{
	const struct node *x = *(const struct node *const *)a;
	const struct node *y = *(const struct node *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The read nodes in the order of their first read; count in *n. */
static struct node **read_nodes(struct lsq_recorder *rec, size_t *n)
{
	size_t total = 0, k = 0;
	struct node **v;

	for (unsigned i = 0; i < SHARDS; i++)
		total += rec->shards[i].count;
	v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (unsigned i = 0; i < SHARDS; i++) {
		struct shard *s = &rec->shards[i];

		for (size_t b = 0; b < s->nbuckets; b++)
			for (struct node *nd = s->buckets[b]; nd; nd = nd->next)
				if (nd->seq)
					v[k++] = nd;
	}
	qsort(v, k, sizeof(*v), by_seq);
	*n = k;
	return v;
}

int lsq_recorder_profile(struct lsq_recorder *rec, struct lsq_profile *out)
{
	static char path[65536];
	struct node **v;
	size_t n;

	memset(out, 0, sizeof(*out));
	v = read_nodes(rec, &n);
	if (!v)
		return LSQ_ERR_NOMEM;
	out->entries = calloc(n ? n : 1, sizeof(*out->entries));
	if (!out->entries) {
		free(v);
		return LSQ_ERR_NOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct lsq_profile_entry *e = &out->entries[out->count];

		if (!path_of(rec, v[i], path, sizeof(path)))
			continue;
		e->path = strdup(path);
		if (!e->path)
			break;
		e->nranges = ranges_of(v[i], &e->ranges);
		out->count++;
	}
	free(v);
	return LSQ_OK;
}

static int write_profile(struct lsq_recorder *rec, FILE *f, size_t *written)
{
	static char path[65536];
	struct node **v;
	size_t n;
	int ret = LSQ_OK;

	v = read_nodes(rec, &n);
	if (!v)
		return LSQ_ERR_NOMEM;
	if (fprintf(f, "# sqfs-lazy startup profile: files in the order of their first read, TAB, byte ranges read\n") < 0)
		ret = LSQ_ERR_IO;
	for (size_t i = 0; i < n && !ret; i++) {
		struct lsq_profile_range *r;
		size_t nr;

		if (!path_of(rec, v[i], path, sizeof(path)))
			continue;
		nr = ranges_of(v[i], &r);
		ret = lsq_profile_write_entry(f, path, r, nr, 0);
		free(r);
		if (!ret)
			(*written)++;
	}
	free(v);
	return ret;
}

void lsq_recorder_finish(struct lsq_recorder *rec, bool write)
{
	size_t written = 0;
	FILE *f;
	int ret;

	if (!rec)
		return;
	/* the workers are gone: no lock needed from here on */
	if (rec->fd < 0) {
		/* learning: the caller took lsq_recorder_profile() */
	} else if (!write) {
		close(rec->fd);
	} else if (ftruncate(rec->fd, 0) != 0 ||
		   !(f = fdopen(rec->fd, "w"))) {
		lsq_err_log("record %s: %s", rec->path, strerror(errno));
		close(rec->fd);
		ret = LSQ_ERR_IO;
	} else {
		ret = write_profile(rec, f, &written);
		if (fclose(f) != 0 && !ret)
			ret = LSQ_ERR_IO;
		if (ret)
			lsq_err_log("record %s: %s", rec->path,
				    lsq_strerror(ret));
		else
			lsq_info("record %s: %zu files written", rec->path,
				 written);
	}
	for (unsigned i = 0; i < SHARDS; i++) {
		struct shard *s = &rec->shards[i];

		for (size_t b = 0; b < s->nbuckets; b++) {
			struct node *nd, *next;

			for (nd = s->buckets[b]; nd; nd = next) {
				next = nd->next;
				free(nd->name);
				free(nd->bits);
				free(nd);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(rec->path);
	free(rec);
}
