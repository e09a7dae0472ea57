// Package tokenize is the token rule shared by the simulated engine and the
// benchmark client: one whitespace-separated word is one token. A real engine
// reports its own counts in the usage block, which the client prefers; this
// rule is only the fallback and the simulator's truth. Encode and Decode give
// the words ids (a fixed vocabulary of VocabSize words), which is what the
// simulator's /tokenize and /detokenize answer and its prefix cache hashes.
package tokenize

import "unicode"

// Count returns the number of whitespace-separated words in s.
func Count(s string) int {
	n, in := 0, false
	for _, r := range s {
		if unicode.IsSpace(r) {
			in = false
			continue
		}
		if !in {
			n++
			in = true
		}
	}
	return n
}
