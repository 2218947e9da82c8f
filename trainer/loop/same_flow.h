// The hooks' rule that every rank returns the same flow at the same call
// (loop/hook.h), checked across ranks: one small all-reduce per hook call,
// so the loop does it only where asked (RankState::check_flow: builds with
// asserts, or GRANARY_CHECK_FLOW=1 in the run's environment). A flow decided
// from a rank's own figure would otherwise send one rank to its next step's
// collective and the others to their after-run hooks: a hang until
// --timeout, far from its cause.
#pragma once

#include <string>

#include "base/status.h"
#include "trainer/comm/comm.h"
#include "trainer/loop/hook.h"

namespace granary {

// Whether the loop checks the rule by default: in builds with asserts.
#ifdef NDEBUG
inline constexpr bool kCheckFlowByDefault = false;
#else
inline constexpr bool kCheckFlowByDefault = true;
#endif

// The environment variable that asks for the check in any build ("1").
inline constexpr const char* kCheckFlowVariable = "GRANARY_CHECK_FLOW";

// OK if `flow` (this rank's, at the call `where`, e.g. "after step 12") is
// every rank's over `comm`; else FailedPrecondition naming the call and how
// many ranks stopped. A collective: every rank calls it at the same call.
Status CheckSameFlow(Comm& comm, Flow flow, const std::string& where);

}  // namespace granary
