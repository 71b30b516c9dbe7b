#include "libclient/preload/socket_table.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <new>

#include "libclient/preload/libc_calls.hpp"

namespace pg_rdma::client {

// An entry's home. users counts the table's references (one per number
// the entry is installed under: numbers) and every EntryRef; phase says
// what the entry is for the holders: a lookup that pins a shell which is
// not Live (or no longer in its slot) lets go and reports no entry. A
// lookup pins only a count above zero (never revives one), so the one
// release that brings users to zero owns the shell alone: it destroys a
// Closing entry and puts the shell back on the free list.
struct Shell {
    enum Phase : int { kFree, kLive, kClosing, kTearing };
    std::atomic<int> users{0};
    std::atomic<int> numbers{0};
    std::atomic<int> phase{kFree};
    SocketEntry* entry = nullptr;  // set while Live or Closing
    Teardown teardown = nullptr;
    Shell* next_free = nullptr;
};

namespace {

// Constant-initialised: no constructor runs, usable from the first wrapper
// call on, whatever the order of constructors.
constinit SocketTable g_table;

// Shells never go back to the allocator: a lookup may still touch one it
// loaded just before the entry was removed. Pushed lock-free (a release
// may run in a signal handler); popped under a mutex (only connect() pops),
// so a pop never races another pop and the list has no ABA problem.
constinit std::atomic<Shell*> g_free{nullptr};
constinit std::mutex g_pop_mutex;

Shell* new_shell() noexcept {
    std::lock_guard lock(g_pop_mutex);
    Shell* head = g_free.load(std::memory_order_acquire);
    while (head != nullptr &&
           !g_free.compare_exchange_weak(head, head->next_free, std::memory_order_acq_rel, std::memory_order_acquire)) {
    }
    if (head != nullptr) return head;
    return new (std::nothrow) Shell;
}

void recycle(Shell* shell) noexcept {
    Shell* head = g_free.load(std::memory_order_acquire);
    do {
        shell->next_free = head;
    } while (!g_free.compare_exchange_weak(head, shell, std::memory_order_acq_rel, std::memory_order_acquire));
}

// The process the table belongs to: set at load and in every fork child
// (fork handlers do not run for vfork, whose child shares this memory).
std::atomic<pid_t> g_owner{0};
pid_t raw_pid() noexcept { return static_cast<pid_t>(libc_syscall()(SYS_getpid)); }
void owner_is_me() noexcept { g_owner.store(raw_pid(), std::memory_order_relaxed); }
__attribute__((constructor(102))) void register_owner() {
    owner_is_me();
    pthread_atfork(nullptr, nullptr, [] { owner_is_me(); });
}

// One more holder of `shell`, unless nobody holds it (a shell whose count
// reached zero is being destroyed or is free: it is not revived).
bool pin(Shell* shell) noexcept {
    int users = shell->users.load(std::memory_order_acquire);
    while (users > 0)
        if (shell->users.compare_exchange_weak(users, users + 1, std::memory_order_acq_rel, std::memory_order_acquire))
            return true;
    return false;
}

}  // namespace

SocketTable& SocketTable::instance() noexcept { return g_table; }

bool SocketTable::owned_here() noexcept { return raw_pid() == g_owner.load(std::memory_order_relaxed); }

EntryRef& EntryRef::operator=(EntryRef&& other) noexcept {
    if (this != &other) {
        if (shell_ != nullptr) SocketTable::release(shell_, nullptr);
        shell_ = other.shell_;
        other.shell_ = nullptr;
    }
    return *this;
}

EntryRef::~EntryRef() {
    if (shell_ != nullptr) SocketTable::release(shell_, nullptr);
}

SocketEntry* EntryRef::get() const noexcept { return shell_ != nullptr ? shell_->entry : nullptr; }

EntryRef SocketTable::find(int fd) const noexcept {
    if (fd < 0 || fd >= kSlots || count_.load(std::memory_order_acquire) == 0) return {};
    // A retry only when the slot changed under us to another entry.
    for (int attempt = 0; attempt < 3; ++attempt) {
        Shell* shell = slots_[fd].load(std::memory_order_acquire);
        if (shell == nullptr) return {};
        if (!pin(shell)) continue;  // being destroyed, or free: the slot has changed
        if (slots_[fd].load(std::memory_order_acquire) == shell &&
            shell->phase.load(std::memory_order_acquire) == Shell::kLive)
            return EntryRef(shell);
        release(shell, nullptr);
    }
    return {};
}

bool SocketTable::install(int fd, std::unique_ptr<SocketEntry> entry) noexcept {
    if (fd < 0 || fd >= kSlots || !entry) return false;
    Shell* shell = new_shell();
    if (shell == nullptr) return false;
    shell->entry = entry.get();
    shell->teardown = nullptr;
    shell->users.fetch_add(1, std::memory_order_acq_rel);  // the table's reference
    shell->numbers.store(1, std::memory_order_release);
    shell->phase.store(Shell::kLive, std::memory_order_release);
    Shell* expected = nullptr;
    if (!g_table.slots_[fd].compare_exchange_strong(expected, shell, std::memory_order_acq_rel)) {
        // Never published; a stale lookup from the shell's last life may
        // still hold it, and whichever lets go last recycles it.
        shell->entry = nullptr;
        shell->phase.store(Shell::kFree, std::memory_order_release);
        release(shell, nullptr);
        return false;
    }
    entry.release();
    count_.fetch_add(1, std::memory_order_acq_rel);
    return true;
}

bool SocketTable::alias(int fd, int copy) noexcept {
    if (copy < 0 || copy >= kSlots) return false;
    EntryRef ref = find(fd);
    if (!ref) return false;
    Shell* shell = ref.shell_;
    // Another number only while one is left: once remove() took the last,
    // the session is ending and a copy made meanwhile stays a plain one.
    int numbers = shell->numbers.load(std::memory_order_acquire);
    do {
        if (numbers == 0) return false;
    } while (!shell->numbers.compare_exchange_weak(numbers, numbers + 1, std::memory_order_acq_rel,
                                                   std::memory_order_acquire));
    shell->users.fetch_add(1, std::memory_order_acq_rel);  // the new number's reference (ref pins it above zero)
    Shell* expected = nullptr;
    if (!slots_[copy].compare_exchange_strong(expected, shell, std::memory_order_acq_rel)) {
        if (shell->numbers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // Every other number went meanwhile: this was the last.
            shell->teardown = nullptr;
            shell->phase.store(Shell::kClosing, std::memory_order_release);
        }
        release(shell, nullptr);  // not the last holder: `ref` still pins it
        return false;
    }
    count_.fetch_add(1, std::memory_order_acq_rel);
    return true;
}

SocketTable::Removal SocketTable::remove(int fd, Teardown teardown) noexcept {
    Removal out;
    // Looked at first: closefrom() asks for every number, and an exchange
    // would write (copy on write in every fork child) all of the table.
    if (fd < 0 || fd >= kSlots || slots_[fd].load(std::memory_order_acquire) == nullptr) return out;
    Shell* shell = slots_[fd].exchange(nullptr, std::memory_order_acq_rel);
    if (shell == nullptr) return out;
    count_.fetch_sub(1, std::memory_order_acq_rel);
    out.found = true;
    if (shell->numbers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        shell->teardown = teardown;
        shell->phase.store(Shell::kClosing, std::memory_order_release);
    }
    out.now = release(shell, &out.error);
    return out;
}

bool SocketTable::release(Shell* shell, int* error) noexcept {
    if (shell->users.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    // The last holder, alone with the shell from here on (pin() never
    // revives a zero count).
    if (shell->phase.load(std::memory_order_acquire) != Shell::kClosing) {
        // Never published (install lost its slot): nothing to destroy.
        shell->phase.store(Shell::kFree, std::memory_order_release);
        recycle(shell);
        return false;
    }
    shell->phase.store(Shell::kTearing, std::memory_order_release);
    SocketEntry* entry = shell->entry;
    shell->entry = nullptr;
    const int result = shell->teardown != nullptr ? shell->teardown(*entry) : 0;
    delete entry;
    if (error != nullptr) *error = result;
    shell->phase.store(Shell::kFree, std::memory_order_release);
    recycle(shell);
    return true;
}

}  // namespace pg_rdma::client
