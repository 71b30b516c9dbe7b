// copy_speed — how fast memcpy() copies buffers of the sizes the transport
// copies (into the staging ring, out of the RX ring), in MiB/s.
//
// Run by perf/run-transport-bench.sh twice: as is, and with glibc told to
// avoid `rep movsb` (GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=...).
// On CPUs that advertise ERMS glibc copies with `rep movsb` above a
// threshold (8 KiB with AVX2, 2,112 B with FSRM), which real x86 CPUs run
// at memory speed and the TCG guest emulates several times slower than
// vector moves: the two runs show what that costs every byte the transport
// (and rsocket) copies in user space in that guest. The kernel's own copies
// (rxe's, for every tool alike) are not affected by the tunable.
//
// Output, one line per size:  copy size=65536 MiBps=434.2
#include <algorithm>
#include <iterator>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t kSizes[] = {4096, 16384, 65536, 1048576};  // bytes
constexpr std::size_t kBytesPerSize = std::size_t{256} << 20;    // copied per size
// Copies cycle through a span as large as the memory the transport copies
// to and from (its 256 KiB RX ring and 128 KiB staging ring), so that the
// figure is neither one hot buffer's nor colder than the transport's; two
// buffers at least where one copy is larger than that.
constexpr std::size_t kSpanBytes = std::size_t{384} << 10;
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

int main()
{
    constexpr std::size_t kLargest = *std::max_element(std::begin(kSizes), std::end(kSizes));
    std::vector<unsigned char> src(std::max(kSpanBytes, 2 * kLargest), 0x5a);
    std::vector<unsigned char> dst(src.size(), 0);
    for (const std::size_t size : kSizes) {
        const std::size_t slots = std::max<std::size_t>(kSpanBytes / size, 2);
        const std::size_t copies = kBytesPerSize / size;
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < copies; ++i) {
            std::memcpy(dst.data() + (i % slots) * size, src.data() + ((i + 1) % slots) * size, size);
            // Keeps the compiler from proving the copies unused.
            asm volatile("" : : "r"(dst.data()) : "memory");
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("copy size=%zu MiBps=%.1f\n", size,
                    static_cast<double>(kBytesPerSize) / kMiB / std::max(seconds, 1e-9));
    }
    return 0;
}
