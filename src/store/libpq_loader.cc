#include "store/libpq_loader.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <libpq-fe.h>

// Every libpq function the store calls: return type, name, parameters, and
// the arguments forwarded. A function used by src/store must be listed here
// (the link fails otherwise, as agentloop links no libpq).
#define AL_LIBPQ_FUNCTIONS(X)                                                                    \
  X(PGconn*, PQconnectdb, (const char* conninfo), (conninfo))                                    \
  X(void, PQfinish, (PGconn * conn), (conn))                                                     \
  X(ConnStatusType, PQstatus, (const PGconn* conn), (conn))                                      \
  X(char*, PQerrorMessage, (const PGconn* conn), (conn))                                         \
  X(int, PQsocket, (const PGconn* conn), (conn))                                                 \
  X(PQnoticeProcessor, PQsetNoticeProcessor, (PGconn * conn, PQnoticeProcessor proc, void* arg), \
    (conn, proc, arg))                                                                           \
  X(PGresult*, PQexec, (PGconn * conn, const char* query), (conn, query))                        \
  X(PGresult*, PQexecParams,                                                                     \
    (PGconn * conn, const char* command, int n_params, const Oid* param_types,                   \
     const char* const* param_values, const int* param_lengths, const int* param_formats,        \
     int result_format),                                                                         \
    (conn, command, n_params, param_types, param_values, param_lengths, param_formats,           \
     result_format))                                                                             \
  X(PGresult*, PQprepare,                                                                        \
    (PGconn * conn, const char* stmt_name, const char* query, int n_params,                      \
     const Oid* param_types),                                                                    \
    (conn, stmt_name, query, n_params, param_types))                                             \
  X(PGresult*, PQexecPrepared,                                                                   \
    (PGconn * conn, const char* stmt_name, int n_params, const char* const* param_values,        \
     const int* param_lengths, const int* param_formats, int result_format),                     \
    (conn, stmt_name, n_params, param_values, param_lengths, param_formats, result_format))      \
  X(int, PQconsumeInput, (PGconn * conn), (conn))                                                \
  X(PGnotify*, PQnotifies, (PGconn * conn), (conn))                                              \
  X(ExecStatusType, PQresultStatus, (const PGresult* res), (res))                                \
  X(char*, PQresultErrorMessage, (const PGresult* res), (res))                                   \
  X(char*, PQresultErrorField, (const PGresult* res, int fieldcode), (res, fieldcode))           \
  X(int, PQntuples, (const PGresult* res), (res))                                                \
  X(char*, PQcmdTuples, (PGresult * res), (res))                                                 \
  X(char*, PQgetvalue, (const PGresult* res, int tup_num, int field_num),                        \
    (res, tup_num, field_num))                                                                   \
  X(int, PQgetlength, (const PGresult* res, int tup_num, int field_num),                         \
    (res, tup_num, field_num))                                                                   \
  X(int, PQgetisnull, (const PGresult* res, int tup_num, int field_num),                         \
    (res, tup_num, field_num))                                                                   \
  X(void, PQclear, (PGresult * res), (res))                                                      \
  X(void, PQfreemem, (void* ptr), (ptr))

namespace {

struct Libpq {
#define AL_LIBPQ_POINTER(ret, name, params, args) ret(*name) params = nullptr;
  AL_LIBPQ_FUNCTIONS(AL_LIBPQ_POINTER)
#undef AL_LIBPQ_POINTER
};

// Written once by LoadLibpq (under std::call_once), read-only afterwards.
Libpq g_libpq;

[[noreturn]] void NotLoaded(const char* name) {
  std::fprintf(stderr, "agentloop: internal error: %s called before LoadLibpq\n", name);
  std::abort();
}

}  // namespace

namespace agentloop::store {

namespace {

// Opens `soname` and resolves every listed function into `out`.
Status Resolve(const char* soname, Libpq& out) {
  void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Unavailable(std::string("the PostgreSQL store needs libpq (Debian package libpq5: "
                                   "apt-get install libpq5): ") +
                       (why != nullptr ? why : std::string(soname) + " not found"));
  }
  Libpq l;
  std::string missing;
#define AL_LIBPQ_RESOLVE(ret, name, params, args)              \
  l.name = reinterpret_cast<ret(*) params>(dlsym(lib, #name)); \
  if (l.name == nullptr) missing += missing.empty() ? #name : ", " #name;
  AL_LIBPQ_FUNCTIONS(AL_LIBPQ_RESOLVE)
#undef AL_LIBPQ_RESOLVE
  if (!missing.empty()) {
    dlclose(lib);
    return Unavailable(std::string("the PostgreSQL client library ") + soname + " lacks " +
                       missing + " (Debian 12's libpq5 has them)");
  }
  // The library stays loaded for the life of the process.
  out = l;
  return Status::Ok();
}

}  // namespace

Status LoadLibpq() {
  static std::once_flag once;
  static Status loaded = Status::Ok();
  std::call_once(once, [] { loaded = Resolve("libpq.so.5", g_libpq); });
  return loaded;
}

Status CheckLibpqForTest(const char* soname) {
  Libpq scratch;
  return Resolve(soname, scratch);
}

}  // namespace agentloop::store

#define AL_LIBPQ_DEFINE(ret, name, params, args)   \
  extern "C" ret name params {                     \
    if (g_libpq.name == nullptr) NotLoaded(#name); \
    return g_libpq.name args;                      \
  }
AL_LIBPQ_FUNCTIONS(AL_LIBPQ_DEFINE)
#undef AL_LIBPQ_DEFINE
