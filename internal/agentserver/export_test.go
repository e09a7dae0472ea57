package agentserver

// OnResultTaken makes the server call f when an upload takes its share of
// the decoding budget (tests wait on it instead of the clock).
func OnResultTaken(f func()) (restore func()) {
	resultTaken = f
	return func() { resultTaken = nil }
}
