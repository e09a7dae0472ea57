// Package longrun tells the long runs' verdicts — a capacity comparison of
// the knees, a soak's trends — as the gate's verdict document
// (gate.Report), so the check run, the PR comment, the check page and the
// dashboard print them through the same methods as every gate verdict.
// It turns what the capacity and soak judges decided into rows and
// computes nothing statistical. (capacity and soak cannot import gate
// themselves: the config that gate reads imports them.)
package longrun
