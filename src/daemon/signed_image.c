/* SPDX-License-Identifier: MIT */
/* signed_image.c - see signed_image.h. */
#include "daemon/signed_image.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "lsq/error.h"
#include "lsq_config.h"

/* The *.pem files of dir, sorted (so messages and tests are stable). */
static int keys_in(const char *dir, char ***out, size_t *n)
{
	struct dirent **names;
	char **keys;
	int count = scandir(dir, &names, NULL, alphasort);
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (count < 0)
		return LSQ_OK; /* no directory: no keys */
	keys = calloc((size_t)count + 1, sizeof(*keys));
	for (int i = 0; i < count; i++) {
		size_t len = strlen(names[i]->d_name);

		if (keys && names[i]->d_name[0] != '.' && len > 4 &&
		    strcmp(names[i]->d_name + len - 4, ".pem") == 0 &&
		    asprintf(&keys[k], "%s/%s", dir, names[i]->d_name) >= 0)
			k++;
		free(names[i]);
	}
	free(names);
	if (!keys)
		return LSQ_ERR_NOMEM;
	*out = keys;
	*n = k;
	return LSQ_OK;
}

int lsq_mount_open_verifier(const struct lsq_mount_options *opt,
			    struct lsq_source *src, struct lsq_verifier **out,
			    char *err, size_t errlen)
{
	struct lsq_verify_options vo = {
		.manifest = opt->manifest,
		.required = opt->verify > 0 || opt->manifest,
	};
	const char *dir = getenv("SQFS_LAZY_KEYS_DIR");
	char **found = NULL;
	size_t nfound = 0;
	int ret;

	*out = NULL;
	if (opt->verify == 0)
		return LSQ_OK;
	if (opt->verify > 0) {
		vo.keys = (const char *const *)opt->verify_keys;
		vo.nkeys = opt->nverify_keys;
	} else {
		if (!dir || !dir[0])
			dir = LSQ_KEYS_DIR;
		ret = keys_in(dir, &found, &nfound);
		if (ret)
			return ret;
		if (nfound == 0) {
			free(found);
			if (opt->manifest) {
				snprintf(err, errlen,
					 "-o manifest=%s: no key to check it with (-o verify=KEY, or keys in %s)",
					 opt->manifest, dir);
				return LSQ_ERR_INVALID;
			}
			return LSQ_OK;
		}
		vo.keys = (const char *const *)found;
		vo.nkeys = nfound;
	}
	ret = lsq_verifier_open(src, &vo, out, err, errlen);
	if (!ret && *out)
		lsq_info("%s: verifying every block against the signed manifest",
			 src->name);
	else if (!ret)
		lsq_info("%s: no signed manifest; blocks are not verified",
			 src->name);
	for (size_t i = 0; i < nfound; i++)
		free(found[i]);
	free(found);
	return ret;
}
