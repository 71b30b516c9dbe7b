// One owner type per verbs / rdma_cm resource. Each releases its resource
// with the matching destroy call; errors on release are ignored because
// nothing useful can be done about them during teardown.
//
// Release order matters and is the reverse of creation; the class that holds
// several of these (Endpoint) declares them in creation order:
//   event channel <- cm id <- [device context] <- PD <- completion channel
//   <- CQ <- MRs <- QP
// so the QP goes first and the event channel last. The device context is
// the connection's own only in a process whose librdmacm descriptors are a
// parent's (cm_events.hpp); everything made on it goes before it.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <memory>

namespace pg_rdma::transport {

struct CmChannelDeleter {
    void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct CmIdDeleter {
    void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct ContextDeleter {
    void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct PdDeleter {
    void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct CompChannelDeleter {
    void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqDeleter {
    void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct MrDeleter {
    void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
// A QP made with ibv_create_qp on a device context of our own, which
// rdma_cm does not know.
struct QpDeleter {
    void operator()(ibv_qp* qp) const { ibv_destroy_qp(qp); }
};

using CmChannelPtr = std::unique_ptr<rdma_event_channel, CmChannelDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;

// The QP of an rdma_cm id: created with rdma_create_qp, so it must be
// destroyed with rdma_destroy_qp while the id still exists.
class CmQp {
public:
    CmQp() = default;
    explicit CmQp(rdma_cm_id* id) : id_(id) {}
    ~CmQp() { reset(); }
    CmQp(CmQp&& o) noexcept : id_(o.id_) { o.id_ = nullptr; }
    CmQp& operator=(CmQp&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = o.id_;
            o.id_ = nullptr;
        }
        return *this;
    }
    CmQp(const CmQp&) = delete;
    CmQp& operator=(const CmQp&) = delete;

    void reset() {
        if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
        id_ = nullptr;
    }
    [[nodiscard]] ibv_qp* get() const { return id_ != nullptr ? id_->qp : nullptr; }

private:
    rdma_cm_id* id_ = nullptr;
};

// An acknowledged-on-destruction rdma_cm event.
struct CmEventDeleter {
    void operator()(rdma_cm_event* e) const { rdma_ack_cm_event(e); }
};
using CmEventPtr = std::unique_ptr<rdma_cm_event, CmEventDeleter>;

}  // namespace pg_rdma::transport
