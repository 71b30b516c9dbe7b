// Nonce generation, kept in its own file so that the OpenSSL dependency is
// visible in one place: the wire-format code itself needs no library.
#include <openssl/rand.h>

#include "protocol/upgrade.hpp"

namespace pg_rdma::protocol {

// RAND_bytes draws from OpenSSL's CSPRNG, seeded from the OS; a nonce from a
// weaker source would let another TCP peer guess and claim the endpoint.
bool generate_nonce(Nonce& out) {
    static_assert(kNonceSize <= 1024, "RAND_bytes takes an int length");
    return RAND_bytes(out.data(), static_cast<int>(out.size())) == 1;
}

}  // namespace pg_rdma::protocol
