/* SPDX-License-Identifier: MIT */
/*
 * recorder.h - -o record=PATH: which files a mount's users read, in the
 * order of their first read, and which parts of them; written as a
 * startup profile (src/profile/profile.h) when the mount ends.
 *
 * Node ids are stateless here (inode ref + 2), so the recorder learns each
 * node's name and parent from the replies that hand node ids to the kernel
 * (lookup, readdirplus): the kernel cannot read a file it never got a node
 * id for. Thread-safe; a read costs one lock of one of 64 shards.
 */
#ifndef LSQ_PROFILE_RECORDER_H
#define LSQ_PROFILE_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lsq_recorder;

/* Open (create) path for writing now, before the image: a bad path fails
 * the mount at once, and a relative one means the working directory of
 * the mount command. LSQ_ERR_IO (errno set), LSQ_ERR_NOMEM. */
int lsq_recorder_create(const char *path, struct lsq_recorder **out);

/* A recorder that writes no file (lsq_recorder_profile gives what it
 * learned) and is bounded: the first reads of max_files files at most,
 * and the names of max_nodes nodes. For learned profiles. LSQ_ERR_NOMEM. */
int lsq_recorder_create_learning(unsigned max_files, unsigned max_nodes,
				 struct lsq_recorder **out);

/* What was read so far, as a profile (files in the order of their first
 * read, with the ranges read). Call once the workers are gone.
 * LSQ_ERR_NOMEM. */
struct lsq_profile;
int lsq_recorder_profile(struct lsq_recorder *rec, struct lsq_profile *out);

/* The unit reads are rounded to (the image's block size; 4 KiB until
 * set). Call before the first read. */
void lsq_recorder_set_granule(struct lsq_recorder *rec, uint32_t granule);

/* The kernel got node id child for name in directory parent. */
void lsq_recorder_name(struct lsq_recorder *rec, uint64_t parent,
		       const char *name, size_t name_len, uint64_t child);

/* Bytes [off, off + len) of node ino (a file of file_size bytes) were
 * read. */
void lsq_recorder_read(struct lsq_recorder *rec, uint64_t ino,
		       uint64_t file_size, uint64_t off, uint64_t len);

/* Write the profile (replacing the file's contents) unless !write (the
 * mount never served: an earlier profile stays) or the recorder has no
 * file (learning), and free everything; NULL is ignored. Logs one line saying what was written, or why not. */
void lsq_recorder_finish(struct lsq_recorder *rec, bool write);

#endif
