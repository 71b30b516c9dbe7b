#include "fake_link.hpp"

#include "testing/catch.hpp"
#include "transport/tx_window.hpp"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <variant>
#include <vector>

namespace pg_rdma::test {
namespace {

constexpr std::size_t kSlotBytes = protocol::kControlMessageSize;
constexpr std::uint32_t kRkeyBase = 0x5000;  // rkeys of the two rings: base + side

transport::FileDescriptor make_eventfd() {
    transport::FileDescriptor fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!fd.valid()) throw std::runtime_error("eventfd failed");
    return fd;
}

void signal_fd(int fd) {
    const std::uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
}

void drain_fd(int fd) {
    std::uint64_t value = 0;
    (void)!::read(fd, &value, sizeof value);
}

}  // namespace

FakeLink::FakeLink(std::shared_ptr<FakeWire> wire, int side, const Settings& settings)
    : wire_(std::move(wire)),
      side_(side),
      settings_(settings),
      rx_ring_(new std::uint8_t[settings.rx_buffer_size]()),
      local_(new std::uint8_t[settings.tx_buffer_size + std::size_t{settings.credits} * kSlotBytes]()),
      rkey_(kRkeyBase + static_cast<std::uint32_t>(side)),
      completion_fd_(make_eventfd()),
      event_fd_(make_eventfd()) {
    wire_->ends[static_cast<std::size_t>(side)] = this;
    // As Endpoint::create: every receive posted before the connection runs.
    for (std::uint32_t slot = 0; slot < settings.credits; ++slot) post_recv(slot);
}

FakeLink::~FakeLink() { wire_->ends[static_cast<std::size_t>(side_)] = nullptr; }

FakeLink* FakeLink::peer() const { return wire_->ends[static_cast<std::size_t>(1 - side_)]; }

bool FakeLink::post_recv(std::uint32_t slot) {
    posted_recvs_.push_back(slot);
    return true;
}

void FakeLink::complete(const ibv_wc& wc, bool solicited) {
    cq_.push_back(wc);
    if (armed_ && (solicited || !solicited_only_)) {
        armed_ = false;
        ++events_raised_;
        signal_fd(completion_fd_.get());
    }
}

bool FakeLink::send(std::uint64_t wr_id, bool signalled, bool solicited, ibv_wc_opcode opcode, bool consumes_receive,
                    const std::uint8_t* data, std::uint32_t len, std::uint32_t imm, std::uint64_t remote_addr,
                    std::uint32_t rkey) {
    if (wire_->refuse_posts) {
        errno = ENOMEM;
        return false;
    }
    if (sends_posted_ - sends_retired_ >= settings_.send_queue_depth) {  // the sender lost count
        errno = ENOMEM;
        return false;
    }
    ++sends_posted_;
    FakeLink* to = peer();
    // A cut wire, or a peer whose queue pair is gone: never acknowledged,
    // never completed (a real device would retry and then report
    // RETRY_EXC_ERR; the keepalive verdict is what we test here).
    if (wire_->cut || wire_->disconnected || to == nullptr) return true;
    ibv_wc local{};
    local.wr_id = wr_id;
    local.status = IBV_WC_SUCCESS;
    local.opcode = opcode == IBV_WC_RECV ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    if (opcode == IBV_WC_RECV_RDMA_WITH_IMM || (opcode == IBV_WC_RDMA_WRITE && len > 0)) {
        const auto base = reinterpret_cast<std::uintptr_t>(to->rx_ring_.get());
        if (rkey != to->rkey_ || remote_addr < base || remote_addr + len > base + to->settings_.rx_buffer_size) {
            local.status = IBV_WC_REM_ACCESS_ERR;
            complete(local);
            return true;
        }
        std::memcpy(to->rx_ring_.get() + (remote_addr - base), data, len);
    }
    if (consumes_receive) {
        if (to->posted_recvs_.empty()) {  // the sender broke the credit rules
            local.status = IBV_WC_RNR_RETRY_EXC_ERR;
            complete(local);
            return true;
        }
        const std::uint32_t slot = to->posted_recvs_.front();
        to->posted_recvs_.pop_front();
        ibv_wc remote{};
        remote.wr_id = transport::kRecvWrFlag | slot;
        remote.status = IBV_WC_SUCCESS;
        remote.opcode = opcode;
        remote.byte_len = len;
        if (opcode == IBV_WC_RECV)
            std::memcpy(to->local_.get() + to->settings_.tx_buffer_size + std::size_t{slot} * kSlotBytes, data, len);
        else
            remote.imm_data = htonl(imm);
        to->complete(remote, solicited);
    }
    if (signalled) complete(local);
    return true;
}

bool FakeLink::post_write_imm(std::span<const transport::RingWrite> writes, std::uint32_t rkey, std::uint32_t imm) {
    REQUIRE(!writes.empty());
    REQUIRE(writes.size() <= transport::kMaxWritesPerMessage);
    if (writes.size() > 1) ++ring_wrapped_messages_;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        const transport::RingWrite& w = writes[i];
        const bool last = i + 1 == writes.size();
        const std::uint32_t first = transport::first_piece(w.staging_offset, w.len, settings_.tx_buffer_size);
        // Gathered from the staging buffer's end and start, as a device's
        // two scatter/gather entries; a link that cannot do that is never
        // asked.
        std::vector<std::uint8_t> bytes(local_.get() + w.staging_offset, local_.get() + w.staging_offset + first);
        if (first < w.len) {
            REQUIRE(wire_->staging_may_wrap);
            bytes.insert(bytes.end(), local_.get(), local_.get() + (w.len - first));
            ++wrapped_writes_;
            if (writes.size() > 1) ++gathered_ring_pieces_;
        }
        const bool posted = last ? send(w.wr_id, w.signalled, true, IBV_WC_RECV_RDMA_WITH_IMM, true, bytes.data(),
                                        w.len, imm, w.remote_addr, rkey)
                                 : send(w.wr_id, w.signalled, false, IBV_WC_RDMA_WRITE, false, bytes.data(), w.len,
                                        0, w.remote_addr, rkey);
        if (!posted) return false;
    }
    return true;
}

bool FakeLink::staging_may_wrap() const { return wire_->staging_may_wrap; }

bool FakeLink::post_control(std::uint32_t, const protocol::ControlBytes& bytes, std::uint64_t wr_id,
                            bool signalled, bool solicited) {
    protocol::ControlBytes sent = bytes;
    // A GetServerFeature loses the feature bits the wire does not pass on,
    // through the protocol's own codec (an offer is sent before any version
    // is agreed, so in the default format).
    const auto decoded = protocol::decode_control(bytes);
    if (decoded.is_ok())
        if (auto* offer = std::get_if<protocol::FeatureOffer>(&decoded.value)) {
            protocol::FeatureOffer kept = *offer;
            kept.features &= wire_->offer_features;
            sent = protocol::encode_control(kept);
        }
    return send(wr_id, signalled, solicited, IBV_WC_RECV, true, sent.data(), static_cast<std::uint32_t>(sent.size()), 0, 0,
                0);
}

bool FakeLink::post_probe(std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) {
    ++probes_posted_;
    return send(wr_id, true, false, IBV_WC_RDMA_WRITE, false, nullptr, 0, 0, remote_addr, rkey);
}

int FakeLink::poll(std::span<ibv_wc> out) {
    std::size_t n = 0;
    while (n < out.size() && !cq_.empty()) {
        out[n] = cq_.front();
        cq_.pop_front();
        if ((out[n].wr_id & transport::kRecvWrFlag) == 0) sends_retired_ = std::max(sends_retired_, out[n].wr_id + 1);
        ++n;
    }
    return static_cast<int>(n);
}

void FakeLink::take_completion_event() {
    ++events_taken_;
    drain_fd(completion_fd_.get());
}

bool FakeLink::arm(bool solicited_only) {
    // As ibv_req_notify_cq: a request for every completion widens one for
    // solicited ones, never the other way round.
    solicited_only_ = solicited_only && (!armed_ || solicited_only_);
    armed_ = true;
    return true;
}

bool FakeLink::take_peer_gone_event() {
    drain_fd(event_fd_.get());
    const bool gone = gone_event_;
    gone_event_ = false;
    return gone;
}

void FakeLink::disconnect() {
    if (wire_->disconnected) return;
    wire_->disconnected = true;
    for (FakeLink* end : wire_->ends) {
        if (end == nullptr) continue;
        end->gone_event_ = true;
        signal_fd(end->event_fd_.get());
    }
}

const std::uint8_t* FakeLink::control_rx_slot(std::uint32_t slot) const {
    return local_.get() + settings_.tx_buffer_size + std::size_t{slot} * kSlotBytes;
}

protocol::XferMemory FakeLink::rx_ring_announcement() const {
    return {rkey_, reinterpret_cast<std::uintptr_t>(rx_ring_.get()), settings_.rx_buffer_size};
}

FakePair::FakePair(const Settings& sa, const Settings& sb)
    : a(std::make_unique<FakeLink>(wire, 0, sa)), b(std::make_unique<FakeLink>(wire, 1, sb)) {}

std::unique_ptr<Streams> establish(const Settings& sa, const Settings& sb, std::uint64_t offer_features,
                                   bool staging_may_wrap) {
    using Step = transport::Stream::SetupStep;
    auto s = std::make_unique<Streams>(Streams{FakePair(sa, sb), nullptr, nullptr, nullptr, nullptr});
    s->pair.wire->offer_features = offer_features;
    s->pair.wire->staging_may_wrap = staging_may_wrap;
    s->link_a = s->pair.a.get();
    s->link_b = s->pair.b.get();
    transport::Error err;
    s->a = transport::Stream::start(std::move(s->pair.a), transport::Role::Active, err);
    REQUIRE(s->a);
    s->b = transport::Stream::start(std::move(s->pair.b), transport::Role::Passive, err);
    REQUIRE(s->b);
    auto done_a = Step::InProgress, done_b = Step::InProgress;
    for (int i = 0; i < 100 && (done_a != Step::Done || done_b != Step::Done); ++i) {
        if (done_a != Step::Done) done_a = s->a->handshake_step(err);
        if (done_b != Step::Done) done_b = s->b->handshake_step(err);
        INFO(err.message);
        REQUIRE(done_a != Step::Failed);
        REQUIRE(done_b != Step::Failed);
    }
    REQUIRE(done_a == Step::Done);
    REQUIRE(done_b == Step::Done);
    return s;
}

}  // namespace pg_rdma::test
