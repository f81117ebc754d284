// Package grpcfence carries fences over gRPC, as package httpfence does
// over HTTP: server interceptors that admit a call only with a fence its
// resource has not seen overtaken, and client interceptors that send the
// fence.
//
// The fence travels in the "fencing-token" metadata entry, in the text form
// of fence.Fence (fence.Parse), the same as httpfence's Fencing-Token
// header:
//
//	fencing-token: "1764431234567890";lock="orders:42";lease="k3J9x"
//
// The server interceptors record the fence and run the handler while
// holding a per-resource mutex, so no call with an older fence can run
// between the check and the handler's effect. For a stream the mutex is
// held until the handler returns: a long stream keeps newer calls for the
// same resource waiting. The mutex is in-process only: if several
// processes serve the same resource, or the handler's effect can also be
// reached another way, the handler's own writes must be fenced too
// (package redisfence or sqlfence).
//
// # Status codes
//
// A refused call ends with a status that carries a
// google.rpc.ErrorInfo detail (domain "fencelock", reasons below), which
// clients in any language can read:
//
//   - Aborted, reason STALE_FENCE: the resource has accepted a newer
//     fence, or one of another lock. The detail's metadata holds the
//     current fence: current_fence (its text form), current_lock and
//     current_token. Aborted, not FailedPrecondition, because gRPC's
//     status guide keeps Aborted for a failed test-and-set after which
//     the client should retry at a higher level, and that is what a stale
//     holder must do: acquire the lock again and start over with the new
//     fence, never resend the same call.
//   - InvalidArgument, reason FENCE_REQUIRED: no fence was sent, and
//     Server.Optional is false.
//   - InvalidArgument, reason MALFORMED_FENCE: the fence does not parse,
//     fails fence.Fence.Validate, or was sent more than once.
//   - Unavailable: the Store failed, or the call's context ended while it
//     waited for its resource.
//
// The client interceptors turn a STALE_FENCE status into an error that
// wraps fence.ErrStale, a *fence.StaleError with the current fence, and
// still carries the status (status.FromError and status.Code see it).
//
// This package is its own module so that gRPC and protobuf never enter
// the library's go.mod.
package grpcfence
