/* SPDX-License-Identifier: MIT */
#include "common/long_work.h"

_Thread_local void (*lsq_long_work_hook)(enum lsq_long_work what, bool done);
