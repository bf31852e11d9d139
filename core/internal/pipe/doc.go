// Package pipe sends lockkit's commands on a go-redis client and coalesces them into pipelines
// while enough of them are in flight at once, through go-redis's automatic pipelining (the
// deferred face of its AutoPipeliner, EXPERIMENTAL upstream, v9.23): the one place core touches
// that API.
//
// Below the Sender's threshold of commands in flight, a command goes straight out on the client:
// a lone caller pays no extra hop and no extra allocation. Above it, the command goes to the
// pipeliner, or straight out, as the lanes decide (lanes.go), and its caller waits for the reply
// with its own context; one whose context ends first gets an error that wraps the context's (see
// Settle), and its command still runs, as a plain client's command whose reply was lost may have.
//
// The pipeliner is go-redis's own, cached on the client and shared with whoever else asks it for
// one (the first caller's options win); the Sender never closes it. See bench/AUTOPIPELINE.md.
package pipe
