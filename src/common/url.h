/* SPDX-License-Identifier: MIT */
/*
 * url.h - keep credentials of URLs ("http://user:password@host/...") out of
 * everything a user or another process can see: log and error lines, the
 * fsname in /proc/mounts, the process's command line.
 */
#ifndef LSQ_COMMON_URL_H
#define LSQ_COMMON_URL_H

/* A malloc'd copy of url for messages: its userinfo ("user:password@"), if
 * any, becomes "***@" and its query and fragment, if any, "?***" (signed
 * URLs carry their credentials there); the caller frees it. NULL only when
 * out of memory. Strings without "://" are copied unchanged. */
char *lsq_url_redact(const char *url);

/* Overwrite in place, with '*', the userinfo of every URL inside s (a URL
 * alone, or an option list such as "mirror=http://u:p@h/x,retries=1").
 * Returns the number of bytes overwritten. */
unsigned long lsq_url_scrub(char *s);

#endif
