// The real PostgreSQL 15 binary: does it import, through its GOT, every
// call pg_rdma will redirect, and does patching work in it? Runs
// `postgres --version` with postgres_probe.so preloaded (paths from the
// environment, set by meson) and checks the probe's report.
#include "testing/catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace {

struct Run {
    std::string out;
    int status = -1;
};

// Runs `postgres --version` with only LD_PRELOAD in its environment.
Run run_postgres_with_probe(const char* postgres, const char* probe) {
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        const std::string preload = std::string("LD_PRELOAD=") + probe;
        char* const argv[] = {const_cast<char*>(postgres), const_cast<char*>("--version"), nullptr};
        char* const envp[] = {const_cast<char*>(preload.c_str()), nullptr};
        execve(postgres, argv, envp);
        _exit(127);
    }
    close(pipe_fds[1]);
    Run run;
    char buf[4096];
    ssize_t n;
    while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) run.out.append(buf, static_cast<std::size_t>(n));
    close(pipe_fds[0]);
    REQUIRE(waitpid(pid, &run.status, 0) == pid);
    return run;
}

bool has_line(const std::string& out, const std::string& line) {
    std::istringstream lines(out);
    for (std::string l; std::getline(lines, l);)
        if (l == line) return true;
    return false;
}

}  // namespace

TEST_CASE("postgres imports the calls pg_rdma redirects, and its GOT can be patched", "[got][postgres]") {
    const char* postgres = std::getenv("PG_RDMA_POSTGRES");
    const char* probe = std::getenv("PG_RDMA_GOT_PROBE");
    const char* major = std::getenv("PG_RDMA_PG_MAJOR");
    REQUIRE(postgres != nullptr);
    REQUIRE(probe != nullptr);
    REQUIRE(major != nullptr);
    REQUIRE(access(postgres, X_OK) == 0);
    const Run run = run_postgres_with_probe(postgres, probe);
    INFO(run.out);
    REQUIRE(WIFEXITED(run.status));
    CHECK(WEXITSTATUS(run.status) == 0);
    // The executable the build's pg_config names: the major it was built for.
    CHECK(run.out.find(std::string("postgres (PostgreSQL) ") + major + ".") != std::string::npos);

    // What the extension redirects (server_ext/session/install.cpp): the
    // backend's reads, writes, waits and close.
    for (const char* symbol : {"recv", "send", "epoll_wait", "epoll_ctl", "close"}) {
        INFO(symbol);
        CHECK(has_line(run.out, std::string("import ") + symbol + " JUMP_SLOT"));
    }
    // The socket calls around them, reported, not required: the postmaster
    // waits with select up to 15 and with epoll from 16 on, and nothing
    // pg_rdma does depends on them.
    for (const char* symbol : {"epoll_create1", "accept", "select", "poll", "connect", "socket"})
        if (has_line(run.out, std::string("missing ") + symbol)) WARN("postgres does not import " << symbol);

    CHECK(has_line(run.out, "patch ok"));
    CHECK(has_line(run.out, "slots patched"));
    CHECK(has_line(run.out, "pages read-only "));
    CHECK(has_line(run.out, "restore ok"));
    CHECK(run.out.find("refuse ok: nothing patched: not imported by the executable: "
                       "pg_rdma_probe_no_such_function") != std::string::npos);
}
