/* SPDX-License-Identifier: MIT */
/* endian.h - little-endian loads and stores on unaligned bytes. */
#ifndef LSQ_ENDIAN_H
#define LSQ_ENDIAN_H

#include <stdint.h>
#include <string.h>

static inline uint16_t lsq_le16(const void *p)
{
	const uint8_t *b = p;
	return (uint16_t)(b[0] | (b[1] << 8));
}

static inline uint32_t lsq_le32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
	       ((uint32_t)b[3] << 24);
}

static inline uint64_t lsq_le64(const void *p)
{
	const uint8_t *b = p;
	return (uint64_t)lsq_le32(b) | ((uint64_t)lsq_le32(b + 4) << 32);
}

/* Stores: the mirror of the loads (used by the packer's encoders and the
 * persistent cache). */
static inline void lsq_put16(void *p, uint16_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}

static inline void lsq_put32(void *p, uint32_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline void lsq_put64(void *p, uint64_t v)
{
	lsq_put32(p, (uint32_t)v);
	lsq_put32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

#endif
