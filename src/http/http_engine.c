/* SPDX-License-Identifier: MIT */
/*
 * http_engine.c - the transfer engine.
 *
 * libcurl multiplexes HTTP/2 streams only among the transfers of one multi
 * handle. Once threads are allowed (after the daemon forked), every
 * transfer is handed to one engine thread that drives a multi handle, so
 * parallel requests share one HTTP/2 connection (HTTP/1.1: one pool of at
 * most max_connections connections); the caller waits for its transfer.
 * Before that, or with a libcurl that lacks the multi calls used here, a
 * transfer is curl_easy_perform() on the calling thread.
 *
 * Apart from the transfer itself (http_transfer.c) because it is the one
 * piece with a thread of its own, driving libcurl's multi interface; it
 * starts only when a probe was answered over HTTP/2
 * (lsq_source_allow_threads()), and stops in lsq_http_destroy().
 */
#include <pthread.h>
#include <stdbool.h>

#include "http/http_internal.h"

struct engine_job {
	struct handle *h;
	CURLcode rc;
	bool done;
	struct engine_job *next;
};

static void finish_job(struct http_source *hs, struct engine_job *j,
		       CURLcode rc)
{
	pthread_mutex_lock(&hs->eng_mu);
	j->rc = rc;
	j->done = true;
	pthread_cond_broadcast(&hs->eng_cv);
	pthread_mutex_unlock(&hs->eng_mu);
}

static void *engine_main(void *arg)
{
	struct http_source *hs = arg;
	int running = 0;

	pthread_setname_np(pthread_self(), "sqfs-http");
	for (;;) {
		struct engine_job *todo, *next;
		CURLMsg *msg;
		int left;
		bool stop;

		pthread_mutex_lock(&hs->eng_mu);
		todo = hs->eng_queue;
		hs->eng_queue = NULL;
		stop = hs->eng_stop;
		pthread_mutex_unlock(&hs->eng_mu);
		for (; todo; todo = next) {
			next = todo->next;
			if (curl_multi_add_handle(hs->multi, todo->h->curl) !=
			    CURLM_OK)
				finish_job(hs, todo, CURLE_FAILED_INIT);
			else
				running++;
		}
		/* stop comes after every transfer ended (lsq_http_destroy) */
		if (stop && running == 0)
			break;
		curl_multi_perform(hs->multi, &running);
		while ((msg = curl_multi_info_read(hs->multi, &left))) {
			CURL *easy = msg->easy_handle;
			CURLcode rc = msg->data.result;
			char *job = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(easy, CURLINFO_PRIVATE, &job);
			curl_multi_remove_handle(hs->multi, easy);
			if (job)
				finish_job(hs, (struct engine_job *)job, rc);
		}
		curl_multi_poll(hs->multi, NULL, 0, 1000, NULL);
	}
	return NULL;
}

CURLcode lsq_http_engine_perform(struct http_source *hs, struct handle *h)
{
	struct engine_job job = { .h = h, .rc = CURLE_OK };

	curl_easy_setopt(h->curl, CURLOPT_PRIVATE, (char *)&job);
	/* wait for a connection that may multiplex rather than open more */
	curl_easy_setopt(h->curl, CURLOPT_PIPEWAIT, 1L);
	pthread_mutex_lock(&hs->eng_mu);
	job.next = hs->eng_queue;
	hs->eng_queue = &job;
	pthread_mutex_unlock(&hs->eng_mu);
	curl_multi_wakeup(hs->multi);
	pthread_mutex_lock(&hs->eng_mu);
	while (!job.done)
		pthread_cond_wait(&hs->eng_cv, &hs->eng_mu);
	pthread_mutex_unlock(&hs->eng_mu);
	curl_easy_setopt(h->curl, CURLOPT_PRIVATE, NULL);
	return job.rc;
}

void lsq_http_engine_start(struct http_source *hs)
{
	CURLM *multi;

	if (!curl_multi_init || hs->engine_started)
		return;
	multi = curl_multi_init();
	if (!multi)
		return;
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  (long)hs->opt.max_connections);
	hs->multi = multi;
	if (pthread_create(&hs->engine_thread, NULL, engine_main, hs) != 0) {
		curl_multi_cleanup(multi);
		hs->multi = NULL;
		return;
	}
	hs->engine_started = true;
	atomic_store(&hs->engine_on, true);
}

void lsq_http_engine_stop(struct http_source *hs)
{
	if (!hs->engine_started)
		return;
	pthread_mutex_lock(&hs->eng_mu);
	hs->eng_stop = true;
	pthread_mutex_unlock(&hs->eng_mu);
	curl_multi_wakeup(hs->multi);
	pthread_join(hs->engine_thread, NULL);
	curl_multi_cleanup(hs->multi);
	hs->multi = NULL;
	hs->engine_started = false;
}

