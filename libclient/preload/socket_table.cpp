#include "libclient/preload/socket_table.hpp"

#include <mutex>
#include <new>

namespace pg_rdma::client {

// An entry's home. users counts the table's references (one per number
// the entry is installed under: numbers) and every EntryRef; phase says
// what the entry is for the holders: a lookup that pins a shell which is not Live (or no longer in
// its slot) lets go and reports no entry. Whoever brings users to zero in
// phase Closing destroys the entry and puts the shell back on the free list.
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

}  // namespace

SocketTable& SocketTable::instance() noexcept { return g_table; }

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
        shell->users.fetch_add(1, std::memory_order_acq_rel);
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
        // Never published; only a stale lookup from the shell's last life
        // can hold it now, and it lets go without destroying anything.
        shell->entry = nullptr;
        shell->phase.store(Shell::kFree, std::memory_order_release);
        if (shell->users.fetch_sub(1, std::memory_order_acq_rel) == 1) recycle(shell);
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
    shell->users.fetch_add(1, std::memory_order_acq_rel);  // the new number's reference
    shell->numbers.fetch_add(1, std::memory_order_acq_rel);
    Shell* expected = nullptr;
    if (!slots_[copy].compare_exchange_strong(expected, shell, std::memory_order_acq_rel)) {
        shell->numbers.fetch_sub(1, std::memory_order_acq_rel);
        release(shell, nullptr);  // not the last: `ref` still holds it
        return false;
    }
    count_.fetch_add(1, std::memory_order_acq_rel);
    return true;
}

SocketTable::Removal SocketTable::remove(int fd, Teardown teardown) noexcept {
    Removal out;
    if (fd < 0 || fd >= kSlots) return out;
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
    int expected = Shell::kClosing;
    if (!shell->phase.compare_exchange_strong(expected, Shell::kTearing, std::memory_order_acq_rel)) return false;
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
