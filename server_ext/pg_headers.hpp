// The PostgreSQL 15 server headers, included from C++.
//
// The headers are C and do not declare C linkage themselves, so they are
// wrapped in extern "C". The C library headers they pull in are included
// first, as C++ headers, so that the wrapper never encloses a C++ template.
// PostgreSQL's port.h also renames the printf family with macros
// (vsnprintf -> pg_vsnprintf), which breaks C++ library headers seen after
// it: include this file LAST in every server_ext/*.cpp that talks to
// PostgreSQL, after all C++ and project headers.
#pragma once

#include <algorithm>
#include <chrono>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <cerrno>
#include <clocale>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_authid.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inet.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}
