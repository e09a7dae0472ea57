package bisect

import (
	"regexp"
	"strconv"
	"strings"
)

// Merge commits name their pull request in the two forms GitHub writes:
// a squash merge's title ends "(#123)", a merge commit's says
// "Merge pull request #123 from …".
var (
	squashPR = regexp.MustCompile(`\(#([0-9]+)\)\s*$`)
	mergePR  = regexp.MustCompile(`^Merge pull request #([0-9]+) `)
)

// PRFromMessage returns the pull request a commit message names, or 0.
func PRFromMessage(message string) int {
	title, _, _ := strings.Cut(message, "\n")
	for _, re := range []*regexp.Regexp{squashPR, mergePR} {
		if m := re.FindStringSubmatch(title); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil {
				return n
			}
		}
	}
	return 0
}

// Title is a commit message's first line.
func Title(message string) string {
	title, _, _ := strings.Cut(message, "\n")
	return strings.TrimSpace(title)
}
