/* SPDX-License-Identifier: MIT */
/*
 * inode_map.h - FUSE node ids <-> SquashFS inode references, without state.
 *
 * An inode reference names one inode for the life of the image and is
 * always < 2^48, so it can be the node id itself, shifted by two to keep 0
 * (invalid) and 1 (FUSE_ROOT_ID) free. The root's own reference maps to 1.
 * Nothing is stored, so the kernel's lookup counts need no bookkeeping and
 * forget is a no-op.
 *
 * Plain uint64_t rather than fuse_ino_t keeps this header free of libfuse,
 * so unit tests can include it.
 */
#ifndef LSQ_FUSE_INODE_MAP_H
#define LSQ_FUSE_INODE_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "lsq/image.h"

#define LSQ_NODEID_ROOT 1u      /* FUSE_ROOT_ID */
#define LSQ_NODEID_SHIFT 2u
#define LSQ_INODE_REF_LIMIT (UINT64_C(1) << 48)

static inline uint64_t lsq_nodeid_from_ref(lsq_inode_ref ref,
					   lsq_inode_ref root)
{
	return ref == root ? LSQ_NODEID_ROOT : ref + LSQ_NODEID_SHIFT;
}

/* Returns false for a node id this mapping never hands out (0, or one whose
 * reference would not fit in 48 bits); *ref is then untouched. */
static inline bool lsq_ref_from_nodeid(uint64_t nodeid, lsq_inode_ref root,
				       lsq_inode_ref *ref)
{
	if (nodeid == LSQ_NODEID_ROOT) {
		*ref = root;
		return true;
	}
	if (nodeid < LSQ_NODEID_SHIFT ||
	    nodeid - LSQ_NODEID_SHIFT >= LSQ_INODE_REF_LIMIT)
		return false;
	*ref = nodeid - LSQ_NODEID_SHIFT;
	return true;
}

#endif
