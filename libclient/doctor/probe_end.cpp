#include "libclient/doctor/probe_end.hpp"

#include <cerrno>

namespace pg_rdma::doctor {

ProbeEnd classify_probe_end(UpgradeStage stage, int code, bool declined) noexcept {
    if (declined) return ProbeEnd::Declined;
    // The client's answer to 'E' (transport/upgrade_client.cpp).
    if (code == EPROTONOSUPPORT) return ProbeEnd::NoPgRdma;
    switch (stage) {
        case UpgradeStage::Requesting:
            switch (code) {
                // rdma_usable()'s refusals, before anything is sent.
                case ENOMEM: case ENODEV: case ELIBACC: case EMFILE: case ENFILE: case EINVAL:
                    return ProbeEnd::LocalRefused;
                case ECONNRESET: case EPIPE: return ProbeEnd::NotPostgres;
                default: return ProbeEnd::NoAnswer;
            }
        case UpgradeStage::AwaitingReply:
            switch (code) {
                case ETIMEDOUT: return ProbeEnd::NoAnswer;
                // Closed without a word, or a reply byte no PostgreSQL sends.
                case ECONNRESET: case EPROTO: return ProbeEnd::NotPostgres;
                // 'R' came and the RDMA side could not start (no device
                // for the route here, a refused redirect).
                default: return ProbeEnd::RdmaFailed;
            }
        case UpgradeStage::Connecting: return ProbeEnd::RdmaFailed;
    }
    return ProbeEnd::NoAnswer;
}

const char* to_string(ProbeEnd end) noexcept {
    switch (end) {
        case ProbeEnd::TcpFailed: return "tcp_failed";
        case ProbeEnd::LocalRefused: return "local_refused";
        case ProbeEnd::NotPostgres: return "not_postgresql";
        case ProbeEnd::NoPgRdma: return "no_pg_rdma";
        case ProbeEnd::Declined: return "declined";
        case ProbeEnd::NoAnswer: return "no_answer";
        case ProbeEnd::RdmaFailed: return "rdma_failed";
        case ProbeEnd::EchoFailed: return "echo_failed";
        case ProbeEnd::Works: return "works";
    }
    return "?";
}

}  // namespace pg_rdma::doctor
