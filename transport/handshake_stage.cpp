#include "transport/handshake_stage.hpp"

#include <algorithm>
#include <cerrno>

namespace pg_rdma::transport {

bool HandshakeStage::start(std::unique_ptr<Endpoint> endpoint, Role role, Error& err) {
    role_ = role;
    started_ = SetupClock::now();
    stream_ = Stream::start(std::move(endpoint), role, err);
    return stream_ != nullptr;
}

Deadline HandshakeStage::deadline_for(Deadline setup_deadline) const {
    if (role_ != Role::Passive || !stream_ || !stream_->ring_sent()) return setup_deadline;
    const Deadline granted = started_ + stream_->setup_budget();
    return std::max(setup_deadline, granted);
}

StepStatus HandshakeStage::step(Deadline setup_deadline, Error& err) {
    switch (stream_->handshake_step(err)) {
        case Stream::SetupStep::Done:
            connection_ = std::make_unique<Connection>(std::move(stream_));
            return StepStatus::Done;
        case Stream::SetupStep::Failed:
            stream_.reset();
            return StepStatus::Failed;
        case Stream::SetupStep::InProgress: break;
    }
    if (!passed(deadline_for(setup_deadline))) return StepStatus::InProgress;
    constexpr const char* kWhy = "timed out waiting for the peer's handshake messages";
    stream_->abandon_handshake(kWhy);
    stream_.reset();
    fail(err, ETIMEDOUT, std::string("RDMA handshake failed: ") + kWhy);
    return StepStatus::Failed;
}

int HandshakeStage::fd() const { return stream_ ? stream_->fd() : -1; }

}  // namespace pg_rdma::transport
