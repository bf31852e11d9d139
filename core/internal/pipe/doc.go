// Package pipe sends lockkit's commands on a go-redis client and coalesces them into pipelines
// while enough of them are in flight at once, through go-redis's automatic pipelining (the
// deferred face of its AutoPipeliner, EXPERIMENTAL upstream, v9.23). It is the one place core
// touches that API.
//
// A command that finds fewer than the threshold of the Sender's commands in flight (itself
// included) goes straight out on the client, as it would without the Sender: a lone caller pays
// no extra hop and no extra allocation. Above it, the command is submitted to the pipeliner and
// its caller waits for the reply with its own context, so the context still bounds the call.
// A caller whose context ends first gets an error that wraps the context's (see Settle): its
// command still runs, as a plain client's command whose reply was lost may have.
//
// Above the threshold (2 or more), the Sender measures which of two policies gets its commands
// done faster, every command through the pipeliner or half of them straight out, and keeps that
// one, trying the other now and then (lanes.go): go-redis's one batch in flight has Redis and the
// callers work in turn, which commands sent straight out overlap on a host with idle cores.
//
// The pipeliner is go-redis's own, cached on the client and shared with whoever else asks the
// client for it (the first caller's options win). The Sender asks for it the first time it is
// needed, never closes it (closing the client does), and sends directly when it cannot have one
// (a Ring, a client it cannot recognise, a closed pipeliner) or when its queue is full.
//
// See bench/AUTOPIPELINE.md for what the AutoPipeliner does and what it costs.
package pipe
