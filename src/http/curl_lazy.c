/* SPDX-License-Identifier: MIT */
/* curl_lazy.c - see curl_lazy.h. */
#include "lsq_config.h"

#if LSQ_HAVE_CURL
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "http/curl_lazy.h"

struct lsq_curl_api lsq_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

#define SYM(field, name) { (void **)&lsq_curl.field, name }

static void load(void)
{
	static const struct {
		void **slot;
		const char *name;
	} syms[] = {
		SYM(global_init, "curl_global_init"),
		SYM(version, "curl_version"),
		SYM(easy_init, "curl_easy_init"),
		SYM(easy_cleanup, "curl_easy_cleanup"),
		SYM(easy_perform, "curl_easy_perform"),
		SYM(easy_setopt, "curl_easy_setopt"),
		SYM(easy_strerror, "curl_easy_strerror"),
		SYM(getdate, "curl_getdate"),
		SYM(share_init, "curl_share_init"),
		SYM(share_cleanup, "curl_share_cleanup"),
		SYM(share_setopt, "curl_share_setopt"),
		SYM(slist_append, "curl_slist_append"),
		SYM(slist_free_all, "curl_slist_free_all"),
	};
	static const struct {
		void **slot;
		const char *name;
	} optional[] = {
		SYM(multi_init, "curl_multi_init"),
		SYM(multi_cleanup, "curl_multi_cleanup"),
		SYM(multi_setopt, "curl_multi_setopt"),
		SYM(multi_add_handle, "curl_multi_add_handle"),
		SYM(multi_remove_handle, "curl_multi_remove_handle"),
		SYM(multi_perform, "curl_multi_perform"),
		SYM(multi_poll, "curl_multi_poll"),
		SYM(multi_wakeup, "curl_multi_wakeup"),
		SYM(multi_info_read, "curl_multi_info_read"),
		SYM(easy_getinfo, "curl_easy_getinfo"),
	};
	/* the soname this build was compiled against (libcurl 7 and 8
	 * both keep ABI 4) */
	void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		snprintf(load_error, sizeof(load_error),
			 "cannot load libcurl.so.4 (install libcurl4): %s",
			 dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		/* POSIX: function pointers convert through void * */
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(load_error, sizeof(load_error),
				 "libcurl.so.4 lacks %s", syms[i].name);
			return;
		}
	}
	for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
		*optional[i].slot = dlsym(lib, optional[i].name);
		if (!*optional[i].slot) {
			/* all or none: the engine needs every one */
			for (size_t j = 0; j < i; j++)
				*optional[j].slot = NULL;
			break;
		}
	}
	/* lib stays loaded for the life of the process */
}

int lsq_curl_load(char *err, size_t errlen)
{
	pthread_once(&load_once, load);
	if (load_error[0]) {
		if (errlen)
			snprintf(err, errlen, "%s", load_error);
		return -1;
	}
	return 0;
}
#else
/* built without libcurl: nothing to load (ISO C wants a declaration) */
typedef int lsq_curl_lazy_unused;
#endif
