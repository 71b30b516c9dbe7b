// Feature negotiation: the pure decision behind GetServerFeature and
// SetClientFeature, kept apart from any I/O so it can be tested exhaustively.
//
// The passive side (server) calls negotiate() with the active side's offer and
// its own; the active side (client) calls check_agreement() on the answer.
//   version    highest version both ranges contain
//   features   intersection of both offers (unknown bits drop out here)
//   keepalive  interval = the shorter one (the more demanding side is served),
//              timeout  = the longer one (nobody is declared dead earlier than
//              its own peer expects); each side's timeout >= 2 x its interval
//              makes timeout >= 2 x interval hold for the pair too
//   credits, rx_buffer_size are each side's own resources: checked for range,
//              not merged
#pragma once

#include <string_view>

#include "protocol/control.hpp"

namespace pg_rdma::protocol {

// Range checks shared by the decoder and by callers building an offer from
// settings. Returns an empty view when the offer is acceptable, else why not.
std::string_view validate_offer(const FeatureOffer& offer);

// Server side. On failure `status` says why and the other fields carry the
// server's offer, so the client can log what the server wanted.
FeatureAgreement negotiate(const FeatureOffer& client, const FeatureOffer& server);

// Client side: is this answer one the server could legitimately give to
// `mine`? Returns an empty view when it is, else why not.
std::string_view check_agreement(const FeatureOffer& mine, const FeatureAgreement& answer);

}  // namespace pg_rdma::protocol
