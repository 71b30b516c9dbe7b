// CallClaim: one call at a time, the others refused rather than queued.
#include "testing/catch.hpp"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/call_claim.hpp"

using pg_rdma::transport::CallClaim;

TEST_CASE("a claim held by one call refuses a second until it is let go", "[claim]") {
    CallClaim claim;
    REQUIRE(claim.try_lock());
    CHECK_FALSE(claim.try_lock());  // nested, or another thread's: refused, not re-entered
    claim.unlock();
    CHECK(claim.try_lock());
    claim.unlock();
}

TEST_CASE("a claim taken with lock() waits for the call that holds it", "[claim]") {
    CallClaim claim;
    REQUIRE(claim.try_lock());
    std::atomic<bool> taken{false};
    std::thread waiter([&] {
        const std::lock_guard guard(claim);
        taken.store(true);
    });
    // The waiter cannot have it while this thread holds it.
    for (int i = 0; i < 1000; ++i) std::this_thread::yield();
    CHECK_FALSE(taken.load());
    claim.unlock();
    waiter.join();
    CHECK(taken.load());
    CHECK(claim.try_lock());  // the guard let go
    claim.unlock();
}

TEST_CASE("threads that race for a claim never hold it together", "[claim]") {
    constexpr int kThreads = 4;
    constexpr int kAttemptsEach = 20000;
    CallClaim claim;
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> claims{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < kAttemptsEach; ++i) {
                if (!claim.try_lock()) continue;
                if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
                claims.fetch_add(1);
                inside.fetch_sub(1);
                claim.unlock();
            }
        });
    for (auto& t : threads) t.join();
    CHECK(overlaps.load() == 0);
    CHECK(claims.load() > 0);
}
