#include "transport/endpoint.hpp"

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/cm_events.hpp"
#include "transport/tx_window.hpp"

namespace pg_rdma::transport {
namespace {

constexpr std::size_t kSlotBytes = protocol::kControlMessageSize;

bool set_nonblocking(int fd) {
    const int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

std::size_t local_bytes(const Settings& s) {
    return s.tx_buffer_size + (std::size_t{s.credits} + s.send_queue_depth) * kSlotBytes;
}

// A context of this process's own on `device` (whose context librdmacm
// opened in a parent). The ibv_device is libibverbs' record of the device,
// which the fork copied: opening it opens the device's files anew, here.
ContextPtr open_own_context(ibv_device* device, Error& err) {
    ContextPtr context(ibv_open_device(device));
    if (!context)
        fail_errno(err, errno != 0 ? errno : ENODEV, fmt::format("ibv_open_device({})", ibv_get_device_name(device)));
    return context;
}

// rdma_cm's queue pair attributes carry a RoCE-only part that an
// InfiniBand port refuses; librdmacm masks it off the same way for the
// queue pairs it brings up itself (its "rdma_ucm kernel bug" workaround).
constexpr int kRoceOnlyAttributeBits = 0xe00000;  // bits 21-23 of ibv_qp_attr_mask

}  // namespace

std::size_t Endpoint::pinned_bytes(const Settings& s) { return s.rx_buffer_size + local_bytes(s); }

std::unique_ptr<Endpoint> Endpoint::create(CmChannelPtr channel, CmIdPtr id, const Settings& settings,
                                           Error& err) {
    if (!check_settings(settings, err)) return nullptr;
    if (!check_memlock(pinned_bytes(settings), err)) return nullptr;
    std::unique_ptr<Endpoint> ep(new Endpoint(settings));
    ep->cm_channel_ = std::move(channel);
    ep->id_ = std::move(id);
    if (!ep->create_queues(err) || !ep->create_buffers(err) || !ep->post_all_receives(err))
        return nullptr;
    set_ack_timeout(ep->id_.get());
    return ep;
}

Endpoint::~Endpoint() = default;

bool Endpoint::create_queues(Error& err) {
    ibv_context* ctx = id_->verbs;
    if (ctx == nullptr) return fail(err, ENODEV, "rdma_cm id has no RDMA device (address not on an RDMA port)");
    if (verbs_inherited_from_parent()) {
        own_context_ = open_own_context(ctx->device, err);
        if (!own_context_) return false;
        ctx = own_context_.get();
    }
    pd_.reset(ibv_alloc_pd(ctx));
    if (!pd_) return fail_errno(err, errno ? errno : ENOMEM, "ibv_alloc_pd");
    comp_channel_.reset(ibv_create_comp_channel(ctx));
    if (!comp_channel_)
        return fail_errno(err, errno ? errno : ENOMEM, "ibv_create_comp_channel");
    if (!set_nonblocking(comp_channel_->fd)) return fail_errno(err, errno, "fcntl(completion channel, O_NONBLOCK)");
    const int cq_size = settings_.credits + settings_.send_queue_depth;
    cq_.reset(ibv_create_cq(ctx, cq_size, nullptr, comp_channel_.get(), 0));
    if (!cq_) return fail_errno(err, errno ? errno : ENOMEM, fmt::format("ibv_create_cq({} entries)", cq_size));
    if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return fail_errno(err, rc, "ibv_req_notify_cq");

    // Every RC device we know gathers from more than one piece. One that
    // says it cannot, or that will not say, or that refuses a queue pair
    // with two, still gets a connection: its writes are cut at the staging
    // buffer's end (staging_may_wrap()).
    ibv_device_attr device{};
    write_pieces_ = ibv_query_device(ctx, &device) == 0 ? std::clamp(device.max_sge, 1, kWrapPieces) : 1;

    ibv_qp_init_attr attr{};
    attr.send_cq = cq_.get();
    attr.recv_cq = cq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 0;  // selective signalling, see send_queue.hpp
    attr.cap.max_send_wr = settings_.send_queue_depth;
    attr.cap.max_recv_wr = settings_.credits;
    attr.cap.max_send_sge = static_cast<std::uint32_t>(write_pieces_);
    attr.cap.max_recv_sge = 1;
    const ibv_qp_cap wanted = attr.cap;
    if (!create_queue_pair(attr, err)) {
        if (write_pieces_ == 1) return false;
        attr.cap = wanted;
        attr.cap.max_send_sge = 1;
        if (!create_queue_pair(attr, err)) return false;
        err = Error{};
    }
    // The QP reports what the device granted, possibly more than asked.
    write_pieces_ = static_cast<int>(std::min<std::uint32_t>(attr.cap.max_send_sge, kWrapPieces));
    inline_limit_ = std::min(attr.cap.max_inline_data, settings_.max_inline);
    return true;
}

bool Endpoint::create_queue_pair(ibv_qp_init_attr& attr, Error& err) {
    const char* call = own_context_ ? "ibv_create_qp" : "rdma_create_qp";
    // A device with less room for inline data than asked (or none)
    // refuses the QP; with less of it a write is only slower.
    for (std::uint32_t ask = settings_.max_inline;; ask = next_inline_ask(ask)) {
        const ibv_qp_cap wanted = attr.cap;
        attr.cap.max_inline_data = ask;
        if (own_context_) {
            own_qp_.reset(ibv_create_qp(pd_.get(), &attr));
            if (own_qp_) break;
        } else if (rdma_create_qp(id_.get(), pd_.get(), &attr) == 0) {
            break;
        }
        if (ask == 0 || (errno != EINVAL && errno != ENOMEM))
            return fail_errno(err, errno, fmt::format("{} ({} B of inline data)", call, ask));
        attr.cap = wanted;  // a refusal may have written its own figures back
    }
    if (!own_context_) {
        qp_ = CmQp(id_.get());
        qp_raw_ = qp_.get();
        return true;
    }
    qp_raw_ = own_qp_.get();
    // rdma_create_qp brings its QP to INIT at once; receives may be posted
    // from there on.
    return move_own_queue_pair(IBV_QPS_INIT, "INIT", err);
}

bool Endpoint::move_own_queue_pair(ibv_qp_state state, const char* what, Error& err) {
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = state;
    if (rdma_init_qp_attr(id_.get(), &attr, &mask) != 0)
        return fail_errno(err, errno, fmt::format("rdma_init_qp_attr({})", what));
    if (state == IBV_QPS_RTR) {
        ibv_port_attr port{};
        if (int rc = ibv_query_port(own_context_.get(), id_->port_num, &port); rc != 0)
            return fail_errno(err, rc, fmt::format("ibv_query_port({})", id_->port_num));
        if (port.link_layer == IBV_LINK_LAYER_INFINIBAND) mask &= ~kRoceOnlyAttributeBits;
    }
    if (int rc = ibv_modify_qp(own_qp_.get(), &attr, mask); rc != 0)
        return fail_errno(err, rc, fmt::format("ibv_modify_qp({})", what));
    return true;
}

bool Endpoint::establish(Error& err) {
    if (!brings_up_own_queue_pair()) return true;  // rdma_cm or iw_cm brought the QP up already
    // INIT again first, as librdmacm does for its own QPs: before the
    // connection's CM exchange, rdma_cm's INIT attributes grant the peer
    // no remote access (its RDMA WRITEs into our ring would fail); now
    // they grant what the exchange agreed.
    if (!move_own_queue_pair(IBV_QPS_INIT, "INIT, as connected", err) ||
        !move_own_queue_pair(IBV_QPS_RTR, "RTR", err) || !move_own_queue_pair(IBV_QPS_RTS, "RTS", err))
        return false;
    if (rdma_establish(id_.get()) != 0) return fail_errno(err, errno, "rdma_establish");
    return true;
}

bool Endpoint::create_buffers(Error& err) {
    constexpr int kRemoteWritable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return PinnedBuffer::create(pd_.get(), settings_.rx_buffer_size, kRemoteWritable, "RX ring", rx_ring_, err) &&
           PinnedBuffer::create(pd_.get(), local_bytes(settings_), IBV_ACCESS_LOCAL_WRITE,
                                "TX staging and control slots", local_, err);
}

bool Endpoint::post_all_receives(Error& err) {
    for (std::uint32_t slot = 0; slot < settings_.credits; ++slot)
        if (!post_recv(slot)) return fail_errno(err, errno, "ibv_post_recv");
    return true;
}

const std::uint8_t* Endpoint::control_rx_slot(std::uint32_t slot) const {
    return local_.data() + settings_.tx_buffer_size + std::size_t{slot} * kSlotBytes;
}

std::uint8_t* Endpoint::control_tx_slot(std::uint32_t slot) const {
    return local_.data() + settings_.tx_buffer_size + std::size_t{settings_.credits} * kSlotBytes +
           std::size_t{slot} * kSlotBytes;
}

protocol::XferMemory Endpoint::rx_ring_announcement() const {
    return {rx_ring_.rkey(), reinterpret_cast<std::uintptr_t>(rx_ring_.data()), settings_.rx_buffer_size};
}

bool Endpoint::post_recv(std::uint32_t slot) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(control_rx_slot(slot)), kSlotBytes, local_.lkey()};
    ibv_recv_wr wr{};
    wr.wr_id = kRecvWrFlag | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qp_raw_, &wr, &bad); rc != 0) {
        errno = rc;
        return false;
    }
    return true;
}

bool Endpoint::post_send(ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_raw_, &wr, &bad); rc != 0) {
        errno = rc;
        return false;
    }
    return true;
}

unsigned Endpoint::send_flags(std::uint32_t len, bool signalled, bool solicited) const {
    unsigned flags = signalled ? IBV_SEND_SIGNALED : 0;
    if (solicited) flags |= IBV_SEND_SOLICITED;
    // The staging bytes stay reserved until the completion all the same
    // (tx_window.hpp): inline only changes who reads them, and when.
    if (len <= inline_limit_) flags |= IBV_SEND_INLINE;
    return flags;
}

bool Endpoint::post_write_imm(std::span<const RingWrite> writes, std::uint32_t rkey, std::uint32_t imm) {
    if (writes.empty() || writes.size() > kMaxWritesPerMessage) {
        errno = EINVAL;
        return false;
    }
    // Each write up to the staging buffer's end, then (staging_may_wrap)
    // from its start. Chained into one post: one doorbell for the message.
    std::array<std::array<ibv_sge, kWrapPieces>, kMaxWritesPerMessage> sge{};
    std::array<ibv_send_wr, kMaxWritesPerMessage> wr{};
    for (std::size_t i = 0; i < writes.size(); ++i) {
        const RingWrite& w = writes[i];
        const bool last = i + 1 == writes.size();
        const std::uint32_t first = first_piece(w.staging_offset, w.len, settings_.tx_buffer_size);
        if (first < w.len && write_pieces_ < kWrapPieces) {  // a caller that did not ask staging_may_wrap()
            errno = EINVAL;
            return false;
        }
        sge[i][0] = {reinterpret_cast<std::uintptr_t>(local_.data() + w.staging_offset), first, local_.lkey()};
        sge[i][1] = {reinterpret_cast<std::uintptr_t>(local_.data()), w.len - first, local_.lkey()};
        wr[i].wr_id = w.wr_id;
        wr[i].sg_list = sge[i].data();
        wr[i].num_sge = first < w.len ? kWrapPieces : 1;
        wr[i].opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wr[i].send_flags = send_flags(w.len, w.signalled, last);
        if (last) wr[i].imm_data = htonl(imm);
        wr[i].wr.rdma.remote_addr = w.remote_addr;
        wr[i].wr.rdma.rkey = rkey;
        wr[i].next = last ? nullptr : &wr[i + 1];
    }
    return post_send(wr[0]);
}

bool Endpoint::post_control(std::uint32_t slot, const protocol::ControlBytes& bytes, std::uint64_t wr_id,
                            bool signalled, bool solicited) {
    std::uint8_t* buf = control_tx_slot(slot);
    std::memcpy(buf, bytes.data(), bytes.size());
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), kSlotBytes, local_.lkey()};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = send_flags(kSlotBytes, signalled, solicited);
    return post_send(wr);
}

bool Endpoint::post_probe(std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = nullptr;
    wr.num_sge = 0;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return post_send(wr);
}

int Endpoint::poll(std::span<ibv_wc> out) {
    return ibv_poll_cq(cq_.get(), static_cast<int>(out.size()), out.data());
}

std::string Endpoint::device_name() const {
    const ibv_context* verbs = id_ ? id_->verbs : nullptr;
    const char* name = verbs != nullptr ? ibv_get_device_name(verbs->device) : nullptr;
    return name != nullptr ? name : "";
}

bool Endpoint::take_peer_gone_event() {
    bool gone = false;
    rdma_cm_event* raw = nullptr;
    while (rdma_get_cm_event(cm_channel_.get(), &raw) == 0) {
        const CmEventPtr event(raw);
        if (event->event == RDMA_CM_EVENT_DEVICE_REMOVAL) device_removed_ = true;
        if (event->event == RDMA_CM_EVENT_DISCONNECTED || event->event == RDMA_CM_EVENT_DEVICE_REMOVAL) gone = true;
    }
    return gone;
}

void Endpoint::disconnect() {
    if (own_qp_) {
        // What rdma_disconnect does first to a QP it knows: on InfiniBand
        // and RoCE the error state, which flushes what is outstanding so
        // that nothing waits on a dead peer; on iWARP SQD.
        ibv_qp_attr attr{};
        attr.qp_state = own_context_->device->transport_type == IBV_TRANSPORT_IWARP ? IBV_QPS_SQD : IBV_QPS_ERR;
        (void)ibv_modify_qp(own_qp_.get(), &attr, IBV_QP_STATE);
    }
    rdma_disconnect(id_.get());
}

void Endpoint::take_completion_event() {
    // One read: looping until EAGAIN would cost a second system call per
    // wakeup for an event that cannot be there.
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(comp_channel_.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq_.get(), 1);
}

bool Endpoint::arm(bool solicited_only) {
    if (int rc = ibv_req_notify_cq(cq_.get(), solicited_only ? 1 : 0); rc != 0) {
        errno = rc;
        return false;
    }
    return true;
}

}  // namespace pg_rdma::transport
