/* SPDX-License-Identifier: MIT */
#include "fuse/stats.h"

#include <inttypes.h>
#include <stdio.h>

static const struct {
	const char *name;
	size_t offset;
} counters[] = {
#define C(field) { #field, offsetof(struct lsq_image_stats, field) }
	C(source_reads),
	C(source_bytes),
	C(source_failures),
	C(meta_hits),
	C(meta_misses),
	C(meta_evictions),
	C(meta_bytes),
	C(data_hits),
	C(data_misses),
	C(data_evictions),
	C(data_bytes),
	C(data_direct),
	C(frag_hits),
	C(frag_misses),
	C(frag_evictions),
	C(frag_bytes),
	C(decompress_calls),
	C(decompress_ns),
	C(block_cache_hits),
	C(block_cache_misses),
	C(block_cache_evictions),
	C(block_cache_bytes),
	C(disk_cache_hits),
	C(disk_cache_misses),
	C(disk_cache_writes),
	C(disk_cache_corrupt),
	C(disk_cache_evictions),
	C(disk_cache_bytes),
	C(cas_hits),
	C(cas_misses),
	C(cas_writes),
	C(cas_evictions),
	C(cas_bytes),
	C(metadata_pinned_bytes),
	C(http_requests),
	C(http_bytes),
	C(http_retries),
	C(http_failures),
	C(http_memory_hits),
	C(http_readahead_bytes),
	C(http_in_flight),
	C(http_rtt_us),
	C(http_windows),
	C(http_window_hits),
	C(http_buffer_bytes),
	C(http_url_renewals),
	C(http_url_failures),
	C(fuse_ring_threads),
	C(fuse_ring_requests),
	C(process_rss_bytes),
	C(process_rss_peak_bytes),
	C(buffer_pool_bytes),
	C(verify_units),
	C(verify_reused),
	C(verify_mismatches),
	C(verify_refetches),
	C(verify_refused),
	C(prefetch_files),
	C(prefetch_missing),
	C(prefetch_planned_bytes),
	C(prefetch_spans),
	C(prefetch_spans_done),
	C(prefetch_requests),
	C(prefetch_bytes),
	C(prefetch_failures),
	C(prefetch_blocks),
	C(prefetch_hits),
	C(prefetch_hit_bytes),
	C(background_units),
	C(background_planned_bytes),
	C(background_spans),
	C(background_done),
	C(background_requests),
	C(background_bytes),
	C(background_failures),
	C(background_blocks),
	C(background_hits),
	C(background_hit_bytes),
#undef C
};

#define N_COUNTERS (sizeof(counters) / sizeof(counters[0]))

static uint64_t counter(const struct lsq_image_stats *st, size_t i)
{
	return *(const uint64_t *)((const char *)st + counters[i].offset);
}

static size_t format(const struct lsq_image_stats *st, char *buf, size_t size,
		     char sep, char end)
{
	size_t len = 0;

	if (size > 0)
		buf[0] = '\0';
	for (size_t i = 0; i < N_COUNTERS; i++) {
		char item[96];
		int n;

		n = snprintf(item, sizeof(item), "%s%c%" PRIu64 "%c",
			     counters[i].name, sep, counter(st, i),
			     i + 1 < N_COUNTERS ? end : '\n');
		if (n < 0)
			continue;
		if (len + (size_t)n < size)
			snprintf(buf + len, size - len, "%s", item);
		len += (size_t)n;
	}
	return len;
}

size_t lsq_stats_format(const struct lsq_image_stats *st, char *buf,
			size_t size)
{
	return format(st, buf, size, ' ', '\n');
}

size_t lsq_stats_format_line(const struct lsq_image_stats *st, char *buf,
			     size_t size)
{
	size_t len = format(st, buf, size, '=', ' ');

	/* a log line carries no trailing newline */
	if (len < size)
		buf[len - 1] = '\0';
	return len - 1;
}

size_t lsq_stats_max_len(void)
{
	struct lsq_image_stats max;

	for (size_t i = 0; i < N_COUNTERS; i++)
		*(uint64_t *)((char *)&max + counters[i].offset) = UINT64_MAX;
	return lsq_stats_format(&max, NULL, 0);
}
