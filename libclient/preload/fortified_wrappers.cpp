// glibc's _FORTIFY_SOURCE entry points for the calls this library wraps. A
// program built with -D_FORTIFY_SOURCE=2 (Debian's default for packages)
// calls __poll_chk, __read_chk... instead of poll, read... wherever the
// compiler knows the buffer's size; without these, such a call would reach
// libc directly and see the transport's internal descriptor (a writer
// waiting for POLLOUT would wait for ever). Each checks what glibc checks,
// failing the same way (__chk_fail), then is the wrapper it stands for.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>

extern "C" {

[[noreturn]] void __chk_fail(void);

__attribute__((visibility("default"))) int __poll_chk(pollfd* fds, nfds_t n, int timeout, std::size_t fds_len) {
    if (fds_len / sizeof(*fds) < n) __chk_fail();
    return poll(fds, n, timeout);
}

__attribute__((visibility("default"))) int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* timeout,
                                                       const sigset_t* mask, std::size_t fds_len) {
    if (fds_len / sizeof(*fds) < n) __chk_fail();
    return ppoll(fds, n, timeout, mask);
}

__attribute__((visibility("default"))) ssize_t __read_chk(int fd, void* buf, std::size_t n, std::size_t buf_len) {
    if (n > buf_len) __chk_fail();
    return read(fd, buf, n);
}

__attribute__((visibility("default"))) ssize_t __recv_chk(int fd, void* buf, std::size_t n, std::size_t buf_len,
                                                          int flags) {
    if (n > buf_len) __chk_fail();
    return recv(fd, buf, n, flags);
}

__attribute__((visibility("default"))) ssize_t __recvfrom_chk(int fd, void* buf, std::size_t n,
                                                              std::size_t buf_len, int flags, sockaddr* from,
                                                              socklen_t* from_len) {
    if (n > buf_len) __chk_fail();
    return recvfrom(fd, buf, n, flags, from, from_len);
}

}  // extern "C"
