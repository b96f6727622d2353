/* SPDX-License-Identifier: MIT */
/*
 * curl_lazy.h - libcurl, loaded with dlopen() on first use.
 *
 * libcurl pulls in some 25 libraries (TLS, Kerberos, LDAP, ...) whose
 * loading costs ~35 ms at every start, also for mounts of local files that
 * never speak HTTP. The HTTP source's files include this header (through
 * http_internal.h) after <curl/curl.h>: the macros below route their
 * curl_* calls through a table that lsq_curl_load() fills once, so the
 * binary does not link libcurl at all. Include only from http_internal.h.
 */
#ifndef LSQ_CURL_LAZY_H
#define LSQ_CURL_LAZY_H

#include <stddef.h>
#include <time.h>

#include <curl/curl.h>

struct lsq_curl_api {
	CURLcode (*global_init)(long flags);
	char *(*version)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *curl);
	CURLcode (*easy_perform)(CURL *curl);
	CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
	const char *(*easy_strerror)(CURLcode code);
	time_t (*getdate)(const char *p, const time_t *unused);
	CURLSH *(*share_init)(void);
	CURLSHcode (*share_cleanup)(CURLSH *share);
	CURLSHcode (*share_setopt)(CURLSH *share, CURLSHoption option, ...);
	struct curl_slist *(*slist_append)(struct curl_slist *list,
					   const char *string);
	void (*slist_free_all)(struct curl_slist *list);
	/* optional (NULL when this libcurl lacks them, < 7.68): the multi
	 * interface of the transfer engine */
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *multi);
	CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
	CURLMcode (*multi_add_handle)(CURLM *multi, CURL *curl);
	CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *curl);
	CURLMcode (*multi_perform)(CURLM *multi, int *running);
	CURLMcode (*multi_poll)(CURLM *multi, struct curl_waitfd *extra,
				unsigned n, int timeout_ms, int *numfds);
	CURLMcode (*multi_wakeup)(CURLM *multi);
	CURLMsg *(*multi_info_read)(CURLM *multi, int *left);
	CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
};

/* The table; valid after lsq_curl_load() returned 0. */
extern struct lsq_curl_api lsq_curl;

/* Load libcurl once (thread-safe). Returns 0, or -1 with a one-line reason
 * in err. */
int lsq_curl_load(char *err, size_t errlen);

#define curl_global_init (lsq_curl.global_init)
#define curl_version (lsq_curl.version)
#define curl_easy_init (lsq_curl.easy_init)
#define curl_easy_cleanup (lsq_curl.easy_cleanup)
#define curl_easy_perform (lsq_curl.easy_perform)
#undef curl_easy_setopt /* curl.h may wrap it for type checks */
#define curl_easy_setopt (lsq_curl.easy_setopt)
#define curl_easy_strerror (lsq_curl.easy_strerror)
#define curl_getdate (lsq_curl.getdate)
#define curl_share_init (lsq_curl.share_init)
#define curl_share_cleanup (lsq_curl.share_cleanup)
#undef curl_share_setopt
#define curl_share_setopt (lsq_curl.share_setopt)
#define curl_slist_append (lsq_curl.slist_append)
#define curl_slist_free_all (lsq_curl.slist_free_all)
#define curl_multi_init (lsq_curl.multi_init)
#define curl_multi_cleanup (lsq_curl.multi_cleanup)
#undef curl_multi_setopt
#define curl_multi_setopt (lsq_curl.multi_setopt)
#define curl_multi_add_handle (lsq_curl.multi_add_handle)
#define curl_multi_remove_handle (lsq_curl.multi_remove_handle)
#define curl_multi_perform (lsq_curl.multi_perform)
#define curl_multi_poll (lsq_curl.multi_poll)
#define curl_multi_wakeup (lsq_curl.multi_wakeup)
#define curl_multi_info_read (lsq_curl.multi_info_read)
#undef curl_easy_getinfo
#define curl_easy_getinfo (lsq_curl.easy_getinfo)

#endif
