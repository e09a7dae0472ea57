// Package suggest finds the closest known word to a mistyped one, for "did
// you mean" hints in command-line and configuration errors.
package suggest

import "strings"

// Closest returns the option nearest to word for a "did you mean"
// suggestion: a unique prefix match, or the smallest edit distance within
// a third of the word's length (at least 1, at most 3). It returns "" when
// nothing is close.
func Closest(word string, options []string) string {
	word = strings.ToLower(word)
	best, bestDist := "", 1+min(3, max(1, len(word)/3))
	for _, o := range options {
		d := Distance(word, strings.ToLower(o))
		if d < bestDist {
			best, bestDist = o, d
		}
	}
	if best != "" || len(word) < 3 {
		return best
	}
	var prefixed []string
	for _, o := range options {
		if strings.HasPrefix(strings.ToLower(o), word) {
			prefixed = append(prefixed, o)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// Distance is the Levenshtein distance between a and b, in runes, with
// adjacent transpositions counted as one edit (the commonest typo).
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
