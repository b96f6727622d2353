/* SPDX-License-Identifier: MIT */
/*
 * report.c - how the packer speaks: errors, warnings, unreadable inputs
 * (skipped or fatal, by --skip-unreadable) and the progress line. In the
 * library, not the program, so the phases (scan, data, tables, order)
 * link without sqfs-lazy-pack's main.c.
 */
#include <stdarg.h>
#include <stdio.h>

#include "common/histogram.h"
#include "lsq/error.h"
#include "lsq_config.h"
#include "pack/pack.h"

void pk_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sqfs-lazy-pack: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void pk_warn(const struct pk_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->opt->quiet)
		return;
	fputs("sqfs-lazy-pack: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int pk_read_fail(const struct pk_ctx *ctx, const char *fmt, ...)
{
	bool skip = ctx->opt->skip_unreadable;
	va_list ap;

	if (skip && ctx->opt->quiet)
		return PK_UNREADABLE;
	if (ctx->progress)
		fputs("\r\033[K", stderr);
	fputs(skip ? "sqfs-lazy-pack: warning: " : "sqfs-lazy-pack: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(skip ? " (left out of the image)\n" : "\n", stderr);
	return skip ? PK_UNREADABLE : LSQ_ERR_IO;
}

double pk_now(void)
{
	return (double)lsq_now_ns() / 1e9;
}

void pk_progress(struct pk_ctx *ctx, bool force)
{
	double now, secs;

	if (!ctx->progress)
		return;
	now = pk_now();
	if (!force && now - ctx->last_progress < 0.25)
		return;
	ctx->last_progress = now;
	secs = now - ctx->start_time;
	if (ctx->streaming) /* tar input: the total is not known */
		fprintf(stderr, "\r\033[K%llu files",
			(unsigned long long)ctx->files_done);
	else
		fprintf(stderr, "\r\033[K%llu/%llu files",
			(unsigned long long)ctx->files_done,
			(unsigned long long)ctx->files);
	fprintf(stderr, ", %.1f MiB in, %.1f MiB out, %.1f MiB/s",
		(double)ctx->bytes_in / 1048576.0,
		(double)ctx->pos / 1048576.0,
		secs > 0 ? (double)ctx->bytes_in / 1048576.0 / secs : 0.0);
	if (force)
		fputc('\n', stderr);
}

#if !LSQ_HAVE_LIBARCHIVE
int pk_tar_read(struct pk_ctx *ctx, struct pk_bp *bp)
{
	pk_error("tar input is not built in (needs libarchive)");
	return LSQ_ERR_UNSUPPORTED;
}
#endif
