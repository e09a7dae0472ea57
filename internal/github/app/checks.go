package app

import (
	"strconv"
	"strings"
)

// prFromExternalID reads the PR number perfgate put first in a check run's
// external_id ("17" from older versions, "17:<row>.<generation>" now).
func prFromExternalID(id string) (int, bool) {
	head, _, _ := strings.Cut(id, ":")
	n, err := strconv.Atoi(head)
	return n, err == nil && n > 0
}
