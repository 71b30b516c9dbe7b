// copy_speed — how fast memcpy() copies buffers of the sizes the transport
// copies (into the staging ring, out of the RX ring), in MiB/s.
//
// Run by perf/run-transport-bench.sh twice: as is, and with glibc told to
// avoid `rep movsb` (GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=...).
// glibc copies 8 KiB and more with `rep movsb` on CPUs that advertise ERMS,
// which real x86 CPUs run at memory speed and the TCG guest emulates several
// times slower than vector moves: the two runs show what that costs every
// byte the transport (and rsocket) copies in that guest.
//
// Output, one line per size:  copy size=65536 MiBps=434.2
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t kSizes[] = {4096, 16384, 65536, 1048576};  // bytes
constexpr std::size_t kBytesPerSize = std::size_t{256} << 20;    // copied per size
// Copies cycle through this many distinct buffers so that the figure is not
// one hot cache line's: the rings are 128 and 256 KiB.
constexpr std::size_t kSpanBytes = std::size_t{4} << 20;
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

int main()
{
    std::vector<unsigned char> src(kSpanBytes, 0x5a), dst(kSpanBytes, 0);
    for (const std::size_t size : kSizes) {
        const std::size_t slots = kSpanBytes / size;
        const std::size_t copies = kBytesPerSize / size;
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < copies; ++i) {
            const std::size_t at = (i % slots) * size;
            std::memcpy(dst.data() + at, src.data() + ((i + 1) % slots) * size, size);
            // Keeps the compiler from proving the copies unused.
            asm volatile("" : : "r"(dst.data()) : "memory");
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("copy size=%zu MiBps=%.1f\n", size,
                    static_cast<double>(kBytesPerSize) / kMiB / std::max(seconds, 1e-9));
    }
    return 0;
}
