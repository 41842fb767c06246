package main

import (
	"fmt"
	"strconv"
)

// The network workloads: the download sensor's cost on a
// transfer that is a download, and on the small receives that are not.
const (
	// netPongMsg is the ping-pong's message: small, as RPC and
	// keep-alive chatter are, so every receive is a probe hit.
	netPongMsg = 64
	// netPongSlack is how much worse than the pipe ping-pong's ratio the
	// socket ping-pong may be: the probes of its receives and sends on top
	// of the same context switches.
	netPongSlack = 0.02
)

var networkWorkloadNames = []string{"netstream", "netpong"}

// networkWorkloads are the network workloads among those want accepts:
// a loopback transfer of sz.bigFile (1 GiB), and a ping-pong of 64-byte
// messages over a loopback TCP connection, half the pipe ping-pong's
// rounds (a TCP round trip costs about twice a pipe's).
func networkWorkloads(sz sizes, want func(string) bool) []*workload {
	var ws []*workload
	if want("netstream") {
		ws = append(ws, &workload{Name: "netstream", Title: fmt.Sprintf("loopback TCP transfer %s", human(sz.bigFile)),
			Budget: 1.05, NoLoss: true, Args: []string{"tcpstream", strconv.FormatInt(sz.bigFile, 10)}})
	}
	if want("netpong") {
		rounds := sz.rounds / 2
		ws = append(ws, &workload{Name: "netpong", Title: fmt.Sprintf("loopback TCP ping-pong %dk × %d B", rounds/1000, netPongMsg),
			// The budget is the pipe ping-pong's measured ratio plus
			// netPongSlack when both ran (relativeBudgets); this is its
			// fallback, the pipe ping-pong's budget plus the slack.
			Budget: 1.10 + netPongSlack, NoLoss: true,
			Args: []string{"tcppong", strconv.Itoa(rounds), strconv.Itoa(netPongMsg)}})
	}
	return ws
}

// relativeBudgets sets the socket ping-pong's budget to the pipe
// ping-pong's median ratio plus netPongSlack, when both ran, and checks
// it again: the network probes may add that much to the same switches.
func relativeBudgets(res *results) {
	var pipe, sock *summary
	for _, s := range res.Workloads {
		switch s.Name {
		case "ctxswitch":
			pipe = s
		case "netpong":
			sock = s
		}
	}
	if pipe == nil || sock == nil || len(pipe.Ratios) == 0 {
		return
	}
	sock.Budget = pipe.RatioMedian + netPongSlack
	if res.Smoke {
		return
	}
	res.Misses = res.Misses[:0:0]
	sock.Misses = nil
	sock.checkBudgets()
	for _, s := range res.Workloads {
		res.Misses = append(res.Misses, s.Misses...)
	}
}
