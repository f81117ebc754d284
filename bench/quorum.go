package main

// quorumRows are fencelock's quorum-mode rows, compared with redsync's
// Redlock over the same 3 servers (scenario 6). Every scenario, the
// round-trip table and the quorum table pick them up.
//
// fencelock's quorum mode (NewQuorum) is being written in the working
// tree and is not committed yet, so its row lives in quorum_on.go behind
// the build tag "quorum" (go run -tags quorum .): the module builds
// without it. Once NewQuorum is committed, drop the build tag line.
var quorumRows []contestant

func quorumContestants() []contestant { return quorumRows }

// quorumPending explains the missing row while quorumRows is empty.
const quorumPending = "fencelock quorum mode (NewQuorum) not built in: row pending (go run -tags quorum . once the library has it)"
