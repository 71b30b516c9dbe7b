// write_imm_loopback: the smallest end-to-end proof that kernel verbs work.
//
// Two RC queue pairs on one device are connected to each other; one does an
// RDMA WRITE WITH IMMEDIATE of a known pattern into the other's registered
// buffer. We check both completions, the immediate value and every byte.
// Prints one PASS line, or names the verbs call that failed (with errno text)
// and exits 1. No device is a failure, never a skip: this program only runs
// inside the Soft-RoCE guest (regress/rxe-guest), where a device must exist.

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace {

// ---- named constants (units in the names) ----------------------------------
constexpr std::uint8_t kPortNum = 1;                 // rxe has a single port
constexpr std::size_t kMessageBytes = 8192;          // > rxe MTU: multi-packet
constexpr std::size_t kBufferBytes = 2 * kMessageBytes;  // room either side
constexpr int kCqDepthEntries = 16;
constexpr std::uint32_t kQueueDepthWrs = 4;
constexpr std::uint32_t kImmediate = 0x5eed'1234;    // host order; sent in network order
constexpr std::uint32_t kStartPsn = 0x1000;          // any 24-bit value works
constexpr std::uint8_t kMinRnrTimerCode = 12;        // IB code 12 = 0.64 ms
constexpr std::uint8_t kAckTimeoutCode = 14;         // 4.096 us * 2^14 = 67 ms
constexpr std::uint8_t kRetryCount = 7;
constexpr std::uint8_t kRnrRetryInfinite = 7;        // 7 means "retry forever"
constexpr std::uint8_t kHopLimit = 1;                // never leaves the host
constexpr auto kPollDeadline = std::chrono::seconds(10);
constexpr std::uint64_t kSendWrId = 1;
constexpr std::uint64_t kRecvWrId = 2;

// A failed verbs call: which call, and the errno text.
class VerbsError : public std::runtime_error {
 public:
  VerbsError(std::string_view call, int err)
      : std::runtime_error(std::string(call) + " failed: " + std::strerror(err) +
                           " (errno " + std::to_string(err) + ")") {}
};

// Calls that return NULL set errno; keep a value or throw.
template <typename T>
T* check_ptr(T* p, std::string_view call) {
  if (p == nullptr) throw VerbsError(call, errno != 0 ? errno : EIO);
  return p;
}

// Calls that return 0 or an errno value (ibv_modify_qp, ibv_post_*).
void check_rc(int rc, std::string_view call) {
  if (rc != 0) throw VerbsError(call, rc > 0 ? rc : (errno != 0 ? errno : EIO));
}

// ---- RAII owners: one per verbs resource --------------------------------
// Each deleter ignores the return code: during unwinding there is nothing
// better to do, and the process is about to exit anyway.
struct DeviceListFree { void operator()(ibv_device** l) const { ibv_free_device_list(l); } };
struct ContextClose { void operator()(ibv_context* c) const { ibv_close_device(c); } };
struct PdDealloc { void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); } };
struct CqDestroy { void operator()(ibv_cq* c) const { ibv_destroy_cq(c); } };
struct MrDereg { void operator()(ibv_mr* m) const { ibv_dereg_mr(m); } };
struct QpDestroy { void operator()(ibv_qp* q) const { ibv_destroy_qp(q); } };
struct MemFree { void operator()(void* p) const { std::free(p); } };

using DeviceList = std::unique_ptr<ibv_device*, DeviceListFree>;
using Context = std::unique_ptr<ibv_context, ContextClose>;
using Pd = std::unique_ptr<ibv_pd, PdDealloc>;
using Cq = std::unique_ptr<ibv_cq, CqDestroy>;
using Mr = std::unique_ptr<ibv_mr, MrDereg>;
using Qp = std::unique_ptr<ibv_qp, QpDestroy>;
using Buffer = std::unique_ptr<std::byte, MemFree>;

Buffer alloc_page_aligned(std::size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  void* p = nullptr;
  const int rc = posix_memalign(&p, static_cast<std::size_t>(page > 0 ? page : 4096), bytes);
  if (rc != 0) throw VerbsError("posix_memalign", rc);
  std::memset(p, 0, bytes);
  return Buffer(static_cast<std::byte*>(p));
}

// ---- device and address selection --------------------------------------
ibv_device* pick_device(ibv_device** list, int count) {
  const char* wanted = std::getenv("RXE_DEV");
  if (count <= 0) throw std::runtime_error("no RDMA device found (ibv_get_device_list returned 0 devices)");
  if (wanted == nullptr || *wanted == '\0') return list[0];
  for (int i = 0; i < count; ++i)
    if (std::string_view(ibv_get_device_name(list[i])) == wanted) return list[i];
  throw std::runtime_error(std::string("RDMA device RXE_DEV=") + wanted + " not found");
}

struct GidChoice {
  int index;
  ibv_gid gid;
  const char* kind;
};

bool is_zero(const ibv_gid& g) {
  for (auto b : g.raw) if (b != 0) return false;
  return true;
}

// ::ffff:a.b.c.d — the GID rxe derives from an IPv4 address.
bool is_ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) if (g.raw[i] != 0) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

// Reads one GID slot and its type; false for an empty or unreadable slot.
bool query_gid_slot(ibv_context* ctx, int index, ibv_gid& gid, std::uint32_t& type) {
#ifdef PG_RDMA_HAVE_QUERY_GID_EX
  ibv_gid_entry e{};
  if (ibv_query_gid_ex(ctx, kPortNum, static_cast<std::uint32_t>(index), &e, 0) != 0) return false;
  gid = e.gid;
  type = e.gid_type;
#else
  // Old rdma-core: no type query. An IPv4-mapped GID is what RoCE v2 uses.
  if (ibv_query_gid(ctx, kPortNum, index, &gid) != 0) return false;
  type = is_ipv4_mapped(gid) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
#endif
  return !is_zero(gid);
}

// Prefer a RoCE v2 entry with an IPv4-mapped GID (routable over UDP/IP, what
// rxe on an IPv4 netdev provides); otherwise any RoCE v2; otherwise the first
// non-zero entry (RoCE v1 / IB).
std::optional<GidChoice> pick_gid(ibv_context* ctx, const ibv_port_attr& port) {
  std::optional<GidChoice> v2_any, first;
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid gid{};
    std::uint32_t type = 0;
    if (!query_gid_slot(ctx, i, gid, type)) continue;
    if (type == IBV_GID_TYPE_ROCE_V2 && is_ipv4_mapped(gid)) return GidChoice{i, gid, "RoCE v2 IPv4"};
    if (type == IBV_GID_TYPE_ROCE_V2 && !v2_any) v2_any = GidChoice{i, gid, "RoCE v2"};
    if (!first) first = GidChoice{i, gid, type == IBV_GID_TYPE_IB ? "IB" : "RoCE v1"};
  }
  return v2_any ? v2_any : first;
}

// ---- QP state machine ----------------------------------------------------
Qp create_rc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kQueueDepthWrs;
  init.cap.max_recv_wr = kQueueDepthWrs;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 0;
  return Qp(check_ptr(ibv_create_qp(pd, &init), "ibv_create_qp"));
}

void to_init(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = kPortNum;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  check_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
           "ibv_modify_qp(INIT)");
}

void to_rtr(ibv_qp* qp, std::uint32_t remote_qpn, const ibv_port_attr& port, const GidChoice& gid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port.active_mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = kStartPsn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = kMinRnrTimerCode;
  a.ah_attr.port_num = kPortNum;
  if (port.link_layer == IBV_LINK_LAYER_INFINIBAND) {
    a.ah_attr.dlid = port.lid;  // IB fabric: LID routing, no GRH needed
  } else {
    a.ah_attr.is_global = 1;    // RoCE: every packet carries a GRH
    a.ah_attr.grh.dgid = gid.gid;  // loopback: the peer is ourselves
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid.index);
    a.ah_attr.grh.hop_limit = kHopLimit;
  }
  check_rc(ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
           "ibv_modify_qp(RTR)");
}

void to_rts(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = kStartPsn;
  a.timeout = kAckTimeoutCode;
  a.retry_cnt = kRetryCount;
  a.rnr_retry = kRnrRetryInfinite;
  a.max_rd_atomic = 1;
  check_rc(ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
           "ibv_modify_qp(RTS)");
}

// ---- data path -----------------------------------------------------------
void post_recv_for_imm(ibv_qp* qp) {
  // WRITE WITH IMM consumes a receive WR but places no data through it.
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvWrId;
  wr.num_sge = 0;
  check_rc(ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
}

void post_write_imm(ibv_qp* qp, const ibv_mr* local, const ibv_mr* remote) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(local->addr);
  sge.length = static_cast<std::uint32_t>(kMessageBytes);
  sge.lkey = local->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kSendWrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(kImmediate);
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(remote->addr);
  wr.wr.rdma.rkey = remote->rkey;
  check_rc(ibv_post_send(qp, &wr, &bad), "ibv_post_send(RDMA_WRITE_WITH_IMM)");
}

struct Completions {
  std::optional<ibv_wc> send, recv;
};

// Busy-polls until both completions arrived or the deadline passed.
Completions poll_both(ibv_cq* cq) {
  Completions got;
  const auto deadline = std::chrono::steady_clock::now() + kPollDeadline;
  while (!got.send || !got.recv) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) throw VerbsError("ibv_poll_cq", errno != 0 ? errno : EIO);
    if (n == 0) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(std::string("timed out waiting for completions (send ") +
                                 (got.send ? "done" : "missing") + ", recv " +
                                 (got.recv ? "done" : "missing") + ")");
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS)
      throw std::runtime_error(std::string("completion wr_id ") + std::to_string(wc.wr_id) +
                               " failed: " + ibv_wc_status_str(wc.status));
    (wc.wr_id == kSendWrId ? got.send : got.recv) = wc;
  }
  return got;
}

std::byte pattern_at(std::size_t i) { return static_cast<std::byte>((i * 31 + 7) & 0xff); }

void check_recv(const ibv_wc& wc, const std::byte* dst) {
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
    throw std::runtime_error("receive completion opcode " + std::to_string(static_cast<int>(wc.opcode)) +
                             ", expected IBV_WC_RECV_RDMA_WITH_IMM");
  if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0) throw std::runtime_error("receive completion has no immediate");
  if (ntohl(wc.imm_data) != kImmediate)
    throw std::runtime_error("immediate mismatch: got " + std::to_string(ntohl(wc.imm_data)) + ", expected " +
                             std::to_string(kImmediate));
  if (wc.byte_len != kMessageBytes)
    throw std::runtime_error("receive byte_len " + std::to_string(wc.byte_len) + ", expected " +
                             std::to_string(kMessageBytes));
  for (std::size_t i = 0; i < kMessageBytes; ++i)
    if (dst[i] != pattern_at(i)) throw std::runtime_error("payload mismatch at byte " + std::to_string(i));
  for (std::size_t i = kMessageBytes; i < kBufferBytes; ++i)
    if (dst[i] != std::byte{0}) throw std::runtime_error("write overran at byte " + std::to_string(i));
}

int run() {
  int count = 0;
  errno = 0;
  // NULL (ENOSYS) means the kernel has no RDMA at all: the host, not the guest.
  DeviceList list(check_ptr(ibv_get_device_list(&count), "no RDMA device found: ibv_get_device_list"));
  ibv_device* dev = pick_device(list.get(), count);
  const std::string name = ibv_get_device_name(dev);

  // Declaration order is the reverse of destruction order: QPs go first,
  // then MRs, CQ and PD, then the device context, then the buffers (which
  // must outlive their MRs) and the device list (which outlives the context).
  Buffer src_buf = alloc_page_aligned(kBufferBytes);
  Buffer dst_buf = alloc_page_aligned(kBufferBytes);
  Context ctx(check_ptr(ibv_open_device(dev), "ibv_open_device"));

  ibv_port_attr port{};
  check_rc(ibv_query_port(ctx.get(), kPortNum, &port), "ibv_query_port");
  if (port.state != IBV_PORT_ACTIVE)
    throw std::runtime_error(name + " port " + std::to_string(kPortNum) + " is " + ibv_port_state_str(port.state) +
                             ", not ACTIVE");
  const auto gid = pick_gid(ctx.get(), port);
  if (!gid && port.link_layer != IBV_LINK_LAYER_INFINIBAND)
    throw std::runtime_error(name + ": no usable GID (does the netdev have an address?)");
  const GidChoice addr = gid.value_or(GidChoice{0, {}, "IB"});

  Pd pd(check_ptr(ibv_alloc_pd(ctx.get()), "ibv_alloc_pd"));
  Cq cq(check_ptr(ibv_create_cq(ctx.get(), kCqDepthEntries, nullptr, nullptr, 0), "ibv_create_cq"));
  Mr src_mr(check_ptr(ibv_reg_mr(pd.get(), src_buf.get(), kBufferBytes, IBV_ACCESS_LOCAL_WRITE), "ibv_reg_mr(src)"));
  Mr dst_mr(check_ptr(ibv_reg_mr(pd.get(), dst_buf.get(), kBufferBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                      "ibv_reg_mr(dst)"));
  Qp writer = create_rc_qp(pd.get(), cq.get());
  Qp target = create_rc_qp(pd.get(), cq.get());

  for (ibv_qp* qp : {writer.get(), target.get()}) to_init(qp);
  to_rtr(writer.get(), target->qp_num, port, addr);
  to_rtr(target.get(), writer->qp_num, port, addr);
  to_rts(writer.get());
  to_rts(target.get());

  for (std::size_t i = 0; i < kMessageBytes; ++i) src_buf.get()[i] = pattern_at(i);
  post_recv_for_imm(target.get());
  post_write_imm(writer.get(), src_mr.get(), dst_mr.get());
  const Completions done = poll_both(cq.get());
  check_recv(*done.recv, dst_buf.get());

  char gid_text[INET6_ADDRSTRLEN] = "-";
  if (gid) inet_ntop(AF_INET6, addr.gid.raw, gid_text, sizeof gid_text);
  std::printf("PASS rdma_smoke_write_imm: device %s, gid index %d (%s %s), mtu %d B, %zu B written with imm 0x%08x\n",
              name.c_str(), addr.index, addr.kind, gid_text, 128 << port.active_mtu, kMessageBytes, kImmediate);
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL rdma_smoke_write_imm: %s\n", e.what());
    return 1;
  }
}
