/* SPDX-License-Identifier: MIT */
/*
 * stats.c - a mount's counters as text. The set starts with every counter
 * the product has, in this order and at 0, so the output always names
 * them all (a mount without a RAM cache prints block_cache_hits 0); the
 * image, its layers and the daemon then report what they count
 * (lsq_mount_counters). A name reported that is not listed here is
 * printed after these, never dropped.
 */
#include "fuse/stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/histogram.h"
#include "common/log.h"
#include "lsq/error.h"

static const struct {
	const char *name;
	enum lsq_counter_kind kind;
} known[] = {
#define T(name) { #name, LSQ_COUNTER_TOTAL }
#define G(name) { #name, LSQ_COUNTER_GAUGE }
	T(source_reads),
	T(source_bytes),
	T(source_failures),
	T(meta_hits),
	T(meta_misses),
	T(meta_evictions),
	G(meta_bytes),
	G(meta_limit_bytes),
	T(data_hits),
	T(data_misses),
	T(data_evictions),
	G(data_bytes),
	G(data_limit_bytes),
	T(data_direct),
	T(frag_hits),
	T(frag_misses),
	T(frag_evictions),
	G(frag_bytes),
	G(frag_limit_bytes),
	T(decompress_calls),
	T(decompress_ns),
	T(block_cache_hits),
	T(block_cache_misses),
	T(block_cache_evictions),
	G(block_cache_bytes),
	G(block_cache_limit_bytes),
	T(disk_cache_hits),
	T(disk_cache_misses),
	T(disk_cache_writes),
	T(disk_cache_corrupt),
	T(disk_cache_evictions),
	G(disk_cache_bytes),
	G(disk_cache_limit_bytes),
	T(cas_hits),
	T(cas_misses),
	T(cas_writes),
	T(cas_evictions),
	G(cas_bytes),
	G(cas_limit_bytes),
	G(metadata_pinned_bytes),
	T(http_requests),
	T(http_bytes),
	T(http_retries),
	T(http_failures),
	T(http_memory_hits),
	T(http_readahead_bytes),
	T(http_span_memory_bytes),
	T(http_span_trims),
	G(http_in_flight),
	G(http_rtt_us),
	T(http_windows),
	T(http_window_hits),
	G(http_link_bytes_per_second),
	T(http_paced),
	T(http_readahead_bets),
	T(http_readahead_bets_lost),
	G(http_buffer_bytes),
	T(http_url_renewals),
	T(http_url_failures),
	G(fuse_ring_threads),
	T(fuse_ring_requests),
	G(fuse_in_flight),
	G(process_rss_bytes),
	G(process_rss_peak_bytes),
	G(process_threads),
	G(process_open_fds),
	G(buffer_pool_bytes),
	G(daemon_pid),
	T(takeovers),
	T(takeovers_crash),
	T(takeovers_upgrade),
	G(takeover_ready),
	T(verify_units),
	T(verify_reused),
	T(verify_mismatches),
	T(verify_refetches),
	T(verify_refused),
	G(prefetch_files),
	G(prefetch_missing),
	G(prefetch_planned_bytes),
	G(prefetch_spans),
	T(prefetch_spans_done),
	T(prefetch_requests),
	T(prefetch_bytes),
	T(prefetch_failures),
	T(prefetch_blocks),
	T(prefetch_hits),
	T(prefetch_hit_bytes),
	G(background_units),
	G(background_planned_bytes),
	T(background_spans),
	T(background_hot_files),
	T(background_hot_spans),
	G(background_done),
	T(background_requests),
	T(background_bytes),
	T(background_failures),
	T(background_blocks),
	T(background_hits),
	T(background_hit_bytes),
#undef T
#undef G
};

void lsq_stats_collect(const struct lsq_mount *m, struct lsq_counter_set *set)
{
	lsq_counter_set_init(set);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		lsq_counter_set_add(set, known[i].name, 0, known[i].kind);
	lsq_mount_counters(m, lsq_counter_set_add, set);
}

static size_t format(const struct lsq_counter_set *set, bool max, char *buf,
		     size_t size, char sep, char end)
{
	size_t len = 0;

	if (size > 0)
		buf[0] = '\0';
	for (size_t i = 0; i < set->n; i++) {
		char item[160];
		int n;

		n = snprintf(item, sizeof(item), "%s%c%" PRIu64 "%c",
			     set->items[i].name, sep,
			     max ? UINT64_MAX : set->items[i].value,
			     i + 1 < set->n ? end : '\n');
		if (n < 0)
			continue;
		if (len + (size_t)n < size)
			snprintf(buf + len, size - len, "%s", item);
		len += (size_t)n;
	}
	return len;
}

size_t lsq_stats_format(const struct lsq_counter_set *set, char *buf,
			size_t size)
{
	return format(set, false, buf, size, ' ', '\n');
}

size_t lsq_stats_format_line(const struct lsq_counter_set *set, char *buf,
			     size_t size)
{
	size_t len = format(set, false, buf, size, '=', ' ');

	/* a log line carries no trailing newline */
	if (len < size)
		buf[len - 1] = '\0';
	return len - 1;
}

size_t lsq_stats_max_len(const struct lsq_counter_set *set)
{
	return format(set, true, NULL, 0, ' ', '\n');
}

/* A value on one line: newlines and tabs become spaces. */
static void one_line(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r' || *s == '\t')
			*s = ' ';
}

/* The q-quantile of histogram name (label value) in ns or bytes; 0
 * without samples or where the histogram does not exist. */
static uint64_t quantile(const char *name, const char *value, double q)
{
	const struct lsq_histogram *h = lsq_histogram_find(name, value);

	return h ? lsq_histogram_quantile(h, q) : 0;
}

char *lsq_stats_info(const struct lsq_mount *m, size_t *len)
{
	const struct lsq_image_info *info = lsq_image_info(m->img);
	const struct lsq_histogram *wait =
		lsq_histogram_find("read_network_wait_seconds", NULL);
	struct lsq_link link = { 0 };
	char problem[512];
	time_t when;
	unsigned recent;
	char *out = NULL;
	size_t size = 0;
	FILE *f;

	lsq_log_last_problem(problem, sizeof(problem), &when, &recent);
	one_line(problem);
	f = open_memstream(&out, &size);
	if (!f)
		return NULL;
	fprintf(f, "image %s\nmountpoint %s\npid %ld\nstarted %lld\n"
		"bytes_used %" PRIu64 "\nblock_size %" PRIu32 "\n"
		"compression %s\ninodes %" PRIu32 "\n"
		"problems_last_minute %u\nlast_problem_at %lld\n"
		"last_problem %s\n",
		m->shown_image ? m->shown_image : "",
		m->mountpoint ? m->mountpoint : "", (long)getpid(),
		(long long)m->started, info->bytes_used, info->block_size,
		info->compression_name ? info->compression_name : "unknown",
		info->inode_count, recent, (long long)when, problem);
	/* a URL's source: the copy answering now */
	if (lsq_source_link(lsq_image_source(m->img), &link) == LSQ_OK &&
	    link.mirrors > 1)
		fprintf(f, "mirror %s\nmirror_index %u\nmirrors %u\n",
			link.mirror, link.mirror_index, link.mirrors);
	/* upper bounds of the buckets the quantiles fall in */
	fprintf(f, "network_waits %" PRIu64 "\nnetwork_wait_p50_ns %" PRIu64
		"\nnetwork_wait_p99_ns %" PRIu64 "\nfuse_read_p99_ns %" PRIu64
		"\n", wait ? (uint64_t)atomic_load(&wait->count) : 0,
		quantile("read_network_wait_seconds", NULL, 0.5),
		quantile("read_network_wait_seconds", NULL, 0.99),
		quantile("fuse_request_seconds", "read", 0.99));
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	*len = size;
	return out;
}
