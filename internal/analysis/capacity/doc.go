// Package capacity finds, per commit, the highest request rate an engine
// sustains within the repository's SLOs — its knee — and compares a pull
// request's knee with its base's, as GuideLLM's sweep does for one server.
//
// The package is pure. A Sweep is the search: a few fixed rates from low to
// high, then a bisection on rate between the last one sustained and the
// first one not, until the bracket is narrower than the plan's resolution
// or its steps are spent (Next / Observe, its state plain JSON so a server
// can persist it between jobs). A Step is one rate's measurement and SLO
// judges it: a rate is sustained when enough of its requests meet every
// SLO (goodput) and few fail. Compare judges head against base on the
// sustainable rate, higher is better, with the bracket's width and the
// spread of repeated sweeps as the noise: a change is only called when the
// two sides' brackets do not overlap. Markdown and SVG draw the
// latency–throughput curves of both sides with the knees marked.
package capacity
